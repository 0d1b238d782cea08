// Package handle is the pure core of a barrier handle's participant: it
// sends each request to every replica of the barrier (only the acting
// primary answers; a label's first Enter goes to its leaf of the
// barrier's combining tree instead, see SetTree), matches the answers with the calls that wait for them,
// ignores duplicates, gives back a semaphore slot nobody will use, and
// decides when an Enter has failed. No goroutines, no clocks, no I/O: the
// participant actor (internal/actors/barrieractor) feeds it events and carries out its
// Steps.
package handle

import (
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// ReaskEvery is how often a waiting Enter, Release or Status asks again:
// each is one message, and one lost in transit (an endpoint that broke
// under load), or ignored by a backup that had not yet learnt what the
// primary decided before it died, would otherwise leave the caller
// waiting until its deadline. A replica answers a repeated Enter with the
// label's outcome, or not at all while it still waits; a repeat of the
// Release that committed as it answered the first; Status is a read.
const ReaskEvery = time.Second

// Rank is the To of a send: the replica at that rank.
type Rank int

// Leaf is the To of a send: the barrier host at that position of the
// barrier's combining tree.
type Leaf int

// Reask is the timer message that makes the waiting Enters ask again.
type Reask struct{}

// Outcome is how an Enter passed.
type Outcome uint8

// The outcomes of an Enter.
const (
	Fired Outcome = iota + 1
	Late
	CatchUp
)

// EnterAnswer ends a waiting Enter: an outcome, or Err.
type EnterAnswer struct {
	ID     uint64
	Kind   Outcome
	Reason string
	Err    error
}

// CallAnswer ends a waiting call: the acting primary's answer, or nil if
// the handle stopped.
type CallAnswer struct {
	ID  uint64
	Msg proto.Message
}

// Step is what one event asks of the shell: sends to ranks (the To of
// each is a Rank; the shell sends them as requests, so answers come back)
// and the re-ask timer, answers to the waiting calls, and what to count.
type Step struct {
	outbox.Box
	Enters                 []EnterAnswer
	Calls                  []CallAnswer
	Dup, Conflict, Orphans int
}

type waiter struct {
	id    uint64
	enter *messages.BarrierEnter
	// absent: the ranks that answered this round that they hold none of
	// the barrier: NOT_FOUND (the replica's host has no manager for it:
	// its replica crashed and is being rebuilt, or is not created yet) or
	// lost_state (its manager restarted and nobody synced it). Counted by
	// rank, so that a slow replica's answers to two rounds do not count
	// as two replicas.
	absent
}

// absent collects the answers of replicas that hold none of the barrier,
// by rank: only when every replica gave one is the barrier gone (or, on a
// Close, closed already). Until then another replica may hold it, and
// its answer is the one that counts.
type absent map[int32]proto.Message

// absence classifies an answer: whether it is a replica's news that it
// holds none of the barrier (NOT_FOUND, lost_state, or to a Close,
// DELETED) rather than the acting primary's answer, and its rank.
func absence(m proto.Message) (rank int32, ok bool) {
	err, lost := errorOf(m), isLost(m)
	switch r := m.(type) {
	case *messages.BarrierRefused:
		rank = r.GetFromRank()
	case *messages.BarrierReleased:
		rank = r.GetFromRank()
	case *messages.BarrierStatusReply:
		rank = r.GetFromRank()
	case *messages.BarrierClosed:
		// A Close goes to every replica at once, and the acting primary
		// answers it only once every replica applied the close. A
		// backup that applied it (from the primary) stops, and its
		// member then answers the closer's own Close, which arrives
		// after, DELETED: taken as the answer, that made a Close that
		// closed the barrier fail, before the last replica had heard of
		// it (TestProcessBarriers: one run in five). So a Close's
		// DELETED counts only once every replica said so (the barrier
		// was closed before).
		rank = r.GetFromRank()
		if errors.Is(err, messages.ErrDeleted) {
			return rank, true
		}
	default:
		return 0, false
	}
	return rank, lost || errors.Is(err, messages.ErrNotFound)
}

// add records m from rank; it reports whether every one of n replicas
// has answered so.
func (a absent) add(rank int32, m proto.Message, n int) bool {
	if rank < 0 || int(rank) >= n {
		return false
	}
	a[rank] = m
	return len(a) >= n
}

// verdict is the answer once every replica said it holds none of the
// barrier: a replica's DELETED if one said so (the barrier closed),
// NOT_FOUND if all did, and otherwise UNAVAILABLE: some replicas lost the
// state and the others never had it, so none holds it and none can get
// it back.
func (a absent) verdict(name string) (proto.Message, error) {
	var lost proto.Message
	for rank := range int32(len(a)) { // every rank answered (see add)
		m := a[rank]
		if err := errorOf(m); errors.Is(err, messages.ErrDeleted) {
			return m, err
		}
		if isLost(m) {
			lost = m
		}
	}
	if lost == nil {
		return a[0], errorOf(a[0])
	}
	return withError(lost, messages.Errorf(messages.ErrorCode_UNAVAILABLE,
		"barrier %q: the replicas lost the barrier's state (each restarted, and none that held it is left)", name))
}

// errorOf is the error an answer carries.
func errorOf(m proto.Message) error {
	switch r := m.(type) {
	case *messages.BarrierRefused:
		return messages.ErrOrNil(r.GetError())
	case *messages.BarrierReleased:
		return messages.ErrOrNil(r.GetError())
	case *messages.BarrierStatusReply:
		return messages.ErrOrNil(r.GetError())
	case *messages.BarrierClosed:
		return messages.ErrOrNil(r.GetError())
	}
	return nil
}

func isLost(m proto.Message) bool {
	switch r := m.(type) {
	case *messages.BarrierRefused:
		return r.GetLostState()
	case *messages.BarrierReleased:
		return r.GetLostState()
	case *messages.BarrierStatusReply:
		return r.GetLostState()
	case *messages.BarrierClosed:
		return r.GetLostState()
	}
	return false
}

// withError is a copy of the answer m with err.
func withError(m proto.Message, err *messages.Error) (proto.Message, error) {
	m = proto.Clone(m)
	switch r := m.(type) {
	case *messages.BarrierRefused:
		r.Error = err
	case *messages.BarrierReleased:
		r.Error = err
	case *messages.BarrierStatusReply:
		r.Error = err
	case *messages.BarrierClosed:
		r.Error = err
	}
	return m, err
}

// Participant is the state of one handle.
type Participant struct {
	name      string
	replicas  int
	max       int
	semaphore bool
	enters    map[string]*waiter // label -> waiting Enter
	calls     map[uint64]*call   // waiting calls
	done      map[string]Outcome // labels answered (bounded by max)
	reasking  bool               // a Reask timer is armed
	tree      int                // positions of the barrier's combining tree (0: none)
}

// New returns the participant of a handle of barrier name.
func New(name string) *Participant {
	return &Participant{name: name, enters: map[string]*waiter{}, calls: map[uint64]*call{}, done: map[string]Outcome{}}
}

// Setup names how many replicas the barrier has, its participant limit and
// whether it is a semaphore, once it was created or opened.
func (p *Participant) Setup(replicas, max int, semaphore bool) {
	p.replicas, p.max, p.semaphore = replicas, max, semaphore
}

// SetTree names how many positions the barrier's combining tree has
// (fewer than two: none). An Enter then goes first to one of them, the
// one its label hashes to, and asks again straight at the replicas.
func (p *Participant) SetTree(positions int) { p.tree = positions }

// LeafOf is the tree position label enters at, of positions.
func LeafOf(label string, positions int) int {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(label); i++ {
		h ^= uint32(label[i])
		h *= 16777619
	}
	return int(h % uint32(max(positions, 1)))
}

// onEnter enters label on host for the call id.
func (p *Participant) onEnter(now time.Time, id uint64, label, host string) (s Step) {
	if w, ok := p.enters[label]; ok && w.id != id {
		s.Enters = append(s.Enters, EnterAnswer{ID: id,
			Err: messages.Errorf(messages.ErrorCode_CONFLICT, "label %q is already entering barrier %q", label, p.name)})
		return s
	}
	w := &waiter{id: id, enter: &messages.BarrierEnter{Name: p.name, Label: label, Host: host, RequestId: id}}
	p.enters[label] = w
	if p.tree > 1 {
		// Up the tree: the root's host hands it to every replica as
		// this participant's, and its answers come back here.
		leaf := LeafOf(label, p.tree)
		s.Send(Leaf(leaf), &messages.BarrierTreeEnter{Enter: proto.CloneOf(w.enter), Leaf: int32(leaf)})
	} else {
		p.sendEnter(w, &s)
	}
	p.armReask(now, &s)
	return s
}

// onReask sends every waiting Enter, and every waiting call that may be
// asked again, again.
func (p *Participant) onReask(now time.Time) (s Step) {
	p.reasking = false
	for _, w := range p.enters {
		p.sendEnter(w, &s)
	}
	for _, c := range p.calls {
		if c.again {
			c.send(&s)
		}
	}
	p.armReask(now, &s)
	return s
}

// call is a waiting Release, Close or Status.
type call struct {
	msgs []proto.Message // msgs[rank] goes to the replica of that rank
	// again: the call is asked again every ReaskEvery while it waits. A
	// Close is not: the acting primary answers a second Close DELETED,
	// and its first waits for the backups' acknowledgements, bounded by
	// the barrier's TakeoverAfter.
	again bool
	// absent: the replicas that hold none of the barrier (see
	// onAnswered). Not reset by a re-ask: a replica's absence holds
	// until an acting primary answers.
	absent
}

func (c *call) send(s *Step) {
	for rank, m := range c.msgs {
		s.Send(Rank(rank), m)
	}
}

// onCall sends msgs[rank] to each replica for the call id.
func (p *Participant) onCall(now time.Time, id uint64, msgs []proto.Message) (s Step) {
	c := &call{msgs: msgs, absent: absent{}, again: true}
	for _, m := range msgs {
		if _, ok := m.(*messages.BarrierClose); ok {
			c.again = false
		}
	}
	p.calls[id] = c
	c.send(&s)
	if c.again {
		p.armReask(now, &s)
	}
	return s
}

// Cancel withdraws the waiting Enter of label (if label is set and it is
// the call id's) or the waiting call id.
func (p *Participant) Cancel(id uint64, label string) {
	if w, ok := p.enters[label]; ok && label != "" && w.id == id {
		delete(p.enters, label)
	}
	delete(p.calls, id)
}

// onOutcome is a replica's news that label passed (fired, late or caught
// up).
func (p *Participant) onOutcome(label string, kind Outcome, reason string) (s Step) {
	if w, ok := p.enters[label]; ok {
		delete(p.enters, label)
		s.Enters = append(s.Enters, EnterAnswer{ID: w.id, Kind: kind, Reason: reason})
		if len(p.done) < max(p.max, 1) {
			p.done[label] = kind
		}
		return s
	}
	switch prev, ok := p.done[label]; {
	case ok && prev == kind:
		s.Dup++ // clients ignore duplicate FIRE messages
	case ok:
		s.Conflict++
	default:
		s.Orphans++
		if p.semaphore && kind == Fired {
			// Admitted, but its Enter gave up waiting: nobody will use the
			// slot, so give it back.
			if len(p.done) < max(p.max, 1) {
				p.done[label] = kind
			}
			for rank := range p.replicas {
				s.Send(Rank(rank), &messages.BarrierRelease{Name: p.name, Label: label, ToRank: int32(rank)})
			}
		}
	}
	return s
}

// onRefused is a replica's refusal of an Enter. NOT_FOUND, and a replica's
// news that it lost the barrier's state, fail the Enter only when every
// replica of the round said one or the other (NOT_FOUND if all said
// so, UNAVAILABLE otherwise): another replica may hold the barrier, and
// the next round asks again.
func (p *Participant) onRefused(m *messages.BarrierRefused) (s Step) {
	w, ok := p.enters[m.GetLabel()]
	if !ok || (m.GetRequestId() != 0 && m.GetRequestId() != w.id) {
		return s
	}
	err := messages.ErrOrNil(m.GetError())
	if rank, ok := absence(m); ok {
		if w.absent == nil {
			w.absent = absent{}
		}
		if !w.absent.add(rank, m, p.replicas) {
			return s
		}
		_, err = w.absent.verdict(p.name)
	}
	if err == nil {
		err = messages.Errorf(messages.ErrorCode_INTERNAL, "refused without an error")
	}
	delete(p.enters, m.GetLabel())
	s.Enters = append(s.Enters, EnterAnswer{ID: w.id, Err: err})
	return s
}

// onAnswered is a replica's answer to the call id: the acting primary's,
// which settles it at once, or a replica's news that it holds none of the
// barrier (NOT_FOUND from its host, lost_state, or to a Close, DELETED:
// see absence), which settles it only once every replica gave one (see
// absent.verdict). Waiting for the primary's answer alone, a call to a
// barrier whose every replica lost its state waited for its deadline.
func (p *Participant) onAnswered(id uint64, m proto.Message) (s Step) {
	c, ok := p.calls[id]
	if !ok {
		return s
	}
	if rank, ok := absence(m); ok {
		if !c.add(rank, m, p.replicas) {
			return s
		}
		m, _ = c.verdict(p.name)
	}
	delete(p.calls, id)
	s.Calls = append(s.Calls, CallAnswer{ID: id, Msg: m})
	return s
}

// onStop ends every waiting call: the handle stopped.
func (p *Participant) onStop() (s Step) {
	for l, w := range p.enters {
		s.Enters = append(s.Enters, EnterAnswer{ID: w.id,
			Err: messages.Errorf(messages.ErrorCode_CANCELED, "barrier %q: handle stopped while %q waited", p.name, l)})
	}
	for id := range p.calls {
		s.Calls = append(s.Calls, CallAnswer{ID: id})
	}
	clear(p.enters)
	clear(p.calls)
	return s
}

// Waiting is how many Enters wait.
func (p *Participant) Waiting() int { return len(p.enters) }

// sendEnter asks every replica (only the acting primary answers) and
// starts a new round of NOT_FOUND answers.
func (p *Participant) sendEnter(w *waiter, s *Step) {
	w.absent = nil
	for rank := range p.replicas {
		m := proto.CloneOf(w.enter)
		m.ToRank = int32(rank)
		s.Send(Rank(rank), m)
	}
}

// armReask keeps one timer while any Enter or call waits.
func (p *Participant) armReask(now time.Time, s *Step) {
	if p.reasking || len(p.enters)+len(p.calls) == 0 {
		return
	}
	p.reasking = true
	s.After(now.Add(ReaskEvery), Reask{})
}
