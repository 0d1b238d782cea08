package replica

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func ms(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

// net is a test network of replicas: it delivers replication messages
// between them and keeps what is sent to anyone else.
type net struct {
	t        *testing.T
	replicas map[string]*Replica
	hosts    []*actor.PID
	out      []outbox.Send // to participants and the controller
	down     map[string]bool
	effects  []Effects
	// cut drops what one replica sends another ("from>to" of their
	// hosts): a slow link, or a host without the barrier's manager yet.
	cut map[string]bool
	// now is the time a handover is applied at.
	now time.Time
	// fifo delivers in the order sent, as one ordered connection per pair
	// of replicas does, rather than depth first (a reply before the rest
	// of what its cause sent).
	fifo     bool
	queue    []queued
	draining bool
}

type queued struct {
	from, to *actor.PID
	msg      any
}

func newNet(t *testing.T, k int, o *messages.BarrierOptions, controller *actor.PID) *net {
	n := &net{t: t, replicas: map[string]*Replica{}, down: map[string]bool{}}
	for i := range k {
		n.hosts = append(n.hosts, actor.NewPID("nonhost", fmt.Sprintf("node-%d/barriers", i)))
	}
	for i := range k {
		r, e, err := New(Config{Name: "b", Options: o, Replicas: n.hosts, Members: []string{"node-0", "node-1", "node-2", "node-3"}[:k],
			Rank: i, Controller: controller}, t0)
		if err != nil {
			t.Fatal(err)
		}
		n.replicas[n.hosts[i].String()] = r
		n.deliver(n.hosts[i], e)
	}
	return n
}

func (n *net) r(i int) *Replica { return n.replicas[n.hosts[i].String()] }

// deliver routes e's sends: replication to the replicas, the rest to n.out.
func (n *net) deliver(from *actor.PID, e Effects) {
	if n.fifo {
		n.deliverFIFO(from, e)
		return
	}
	n.effects = append(n.effects, e)
	for _, s := range e.Sends {
		to := pidOf(s.To)
		r := n.replicas[to.String()]
		if r == nil {
			if _, asked := s.To.(Ask); !asked {
				if _, consult := s.Msg.(*messages.BarrierConsult); consult {
					// Its BarrierDecide must come back to the manager.
					n.t.Fatalf("a consult sent as a tell to %v", s.To)
				}
			}
			n.out = append(n.out, s)
			continue
		}
		if n.down[to.String()] || n.cut[from.String()+">"+to.String()] {
			continue
		}
		switch m := s.Msg.(type) {
		case *messages.BarrierReplicate:
			n.deliver(to, r.onReplicate(time.Unix(0, 0), m))
		case *messages.BarrierSyncRequest:
			n.deliver(to, r.onSyncRequest(m))
		case *messages.BarrierCloseAck:
			n.deliver(to, r.onCloseAck(m))
		case *messages.BarrierHandover:
			n.deliver(to, r.onHandover(n.now, m))
		}
	}
}

func (n *net) deliverFIFO(from *actor.PID, e Effects) {
	n.effects = append(n.effects, e)
	for _, s := range e.Sends {
		to := pidOf(s.To)
		if n.replicas[to.String()] == nil {
			n.out = append(n.out, s)
			continue
		}
		if !n.down[to.String()] && !n.cut[from.String()+">"+to.String()] {
			n.queue = append(n.queue, queued{from, to, s.Msg})
		}
	}
	if n.draining {
		return
	}
	n.draining = true
	defer func() { n.draining = false }()
	for len(n.queue) > 0 {
		q := n.queue[0]
		n.queue = n.queue[1:]
		r := n.replicas[q.to.String()]
		var e Effects
		switch m := q.msg.(type) {
		case *messages.BarrierReplicate:
			e = r.onReplicate(n.now, m)
		case *messages.BarrierSyncRequest:
			e = r.onSyncRequest(m)
		case *messages.BarrierCloseAck:
			e = r.onCloseAck(m)
		case *messages.BarrierHandover:
			e = r.onHandover(n.now, m)
		}
		n.deliverFIFO(q.to, e)
	}
}

// client sends a client message to every live replica.
func (n *net) client(now time.Time, from *actor.PID, msg any) {
	for i, h := range n.hosts {
		if n.down[h.String()] {
			continue
		}
		r := n.r(i)
		var e Effects
		switch m := msg.(type) {
		case *messages.BarrierEnter:
			e = r.onEnter(now, m, from)
		case *messages.BarrierRelease:
			e = r.onRelease(now, m, from)
		case *messages.BarrierStatus:
			e = r.onStatus(now, m, from)
		case *messages.BarrierClose:
			e = r.onClose(now, m, from)
		}
		n.deliver(h, e)
	}
}

func (n *net) sentTo(pid *actor.PID) []any {
	var out []any
	for _, s := range n.out {
		if pidOf(s.To).Equal(pid) {
			out = append(out, s.Msg)
		}
	}
	return out
}

// pidOf is the receiver of a send, asked (Ask) or told.
func pidOf(to any) *actor.PID {
	if a, ok := to.(Ask); ok {
		return a.PID
	}
	return to.(*actor.PID)
}

func participant(i int) *actor.PID { return actor.NewPID("nonhost", fmt.Sprintf("p%d", i)) }

func sameState(t *testing.T, a, b *Replica) {
	t.Helper()
	pa, pb := a.Barrier().Passed(), b.Barrier().Passed()
	if !reflect.DeepEqual(pa, pb) || a.Barrier().Entered() != b.Barrier().Entered() ||
		!reflect.DeepEqual(a.Barrier().Waiting(), b.Barrier().Waiting()) ||
		!a.Barrier().NextDeadline().Equal(b.Barrier().NextDeadline()) || a.Seq() != b.Seq() {
		t.Fatalf("replicas differ:\n passed %v / %v\n waiting %v / %v\n next %v / %v\n seq %d / %d",
			pa, pb, a.Barrier().Waiting(), b.Barrier().Waiting(), a.Barrier().NextDeadline(), b.Barrier().NextDeadline(), a.Seq(), b.Seq())
	}
	fa, ra := a.Barrier().Fired()
	fb, rb := b.Barrier().Fired()
	if fa != fb || ra != rb {
		t.Fatalf("fired %v %v / %v %v", fa, ra, fb, rb)
	}
}

// Backups that replay the primary's forwards hold the same state, and so
// does a replica rebuilt from the compacted log.
func TestBackupsReplayToTheSameState(t *testing.T) {
	ctrl := actor.NewPID("nonhost", "controller")
	o := &messages.BarrierOptions{MaxParticipants: 6, Throttle: &messages.BarrierThrottle{Count: 2, IntervalMs: 10},
		EntryCallback: true, CallbackTimeoutMs: 5, MinPercent: 50}
	n := newNet(t, 3, o, ctrl)
	p := n.r(0)
	at := 0
	// Entries, and the callback asked every 5ms and vetoing 200 times.
	for i := range 3 {
		at++
		n.client(ms(at), participant(i), &messages.BarrierEnter{Name: "b", Label: fmt.Sprintf("l%d", i), Host: "h"})
	}
	for range 200 {
		at = int(p.NextWake().Sub(t0) / time.Millisecond)
		n.deliver(n.hosts[0], p.onTick(ms(at)))
		for _, s := range n.out {
			if c, ok := s.Msg.(*messages.BarrierConsult); ok && p.asked[c.GetId()] {
				n.deliver(n.hosts[0], p.onDecide(ms(at), &messages.BarrierDecide{Id: c.GetId()}))
			}
		}
		n.out = n.out[:0]
	}
	if p.LogLen() > 8 {
		t.Fatalf("log of %d ops for 3 entries and 200 quiet consultations", p.LogLen())
	}
	if p.Seq() < 400 {
		t.Fatalf("seq %d", p.Seq())
	}
	sameState(t, p, n.r(1))
	sameState(t, p, n.r(2))
	// Force the fire, then the throttled batches go out on ticks.
	p.asked[999] = true
	n.deliver(n.hosts[0], p.onDecide(ms(at), &messages.BarrierDecide{Id: 999, Fire: true}))
	for i := 3; i < 6; i++ {
		at++
		n.client(ms(at), participant(i), &messages.BarrierEnter{Name: "b", Label: fmt.Sprintf("l%d", i), Host: "h"})
	}
	for !p.NextWake().IsZero() {
		n.deliver(n.hosts[0], p.onTick(p.NextWake()))
	}
	if len(p.Barrier().Passed()) != 6 {
		t.Fatalf("passed %v", p.Barrier().Passed())
	}
	sameState(t, p, n.r(1))
	sameState(t, p, n.r(2))
	// A replica rebuilt from a sync agrees too.
	var sync Effects
	p.sendSync(n.hosts[2], &sync)
	fresh, _, err := New(Config{Name: "b", Options: o, Replicas: n.hosts, Rank: 2, Controller: ctrl}, t0)
	if err != nil {
		t.Fatal(err)
	}
	fresh.onReplicate(t0, sync.Sends[0].Msg.(*messages.BarrierReplicate))
	sameState(t, p, fresh)
}

// A backup that hears a client but not the primary takes over after
// TakeoverAfter, applies what the client asked, and tells the others.
func TestBackupTakesOverWhenThePrimaryIsSilent(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	n := newNet(t, 3, o, nil)
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1})
	n.down[n.hosts[0].String()] = true // the primary fails
	n.client(ms(2), participant(1), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 2})
	b1, b2 := n.r(1), n.r(2)
	if b1.Acting() || b2.Acting() {
		t.Fatal("a backup acts at once")
	}
	if w1, w2 := b1.NextWake(), b2.NextWake(); !w1.Equal(ms(102)) || !w2.Equal(ms(202)) {
		t.Fatalf("wake-ups %v %v: the first backup first", w1.Sub(t0), w2.Sub(t0))
	}
	n.deliver(n.hosts[1], b2.onTick(ms(101))) // too early for anyone
	n.deliver(n.hosts[1], b1.onTick(ms(101)))
	if b1.Acting() {
		t.Fatal("took over before TakeoverAfter")
	}
	e := b1.onTick(ms(102))
	n.deliver(n.hosts[1], e)
	if !b1.Acting() || b1.Epoch() != 1 || !e.TookOver {
		t.Fatalf("acting %v epoch %d", b1.Acting(), b1.Epoch())
	}
	if b2.Acting() || b2.Epoch() != 1 || b2.NextWake().IsZero() == false {
		t.Fatalf("second backup: acting %v epoch %d wake %v", b2.Acting(), b2.Epoch(), b2.NextWake())
	}
	if b1.Barrier().Entered() != 2 || b2.Barrier().Entered() != 2 {
		t.Fatal("the entry the old primary never confirmed was lost")
	}
	// The last entry fires the barrier once, from the new primary.
	n.client(ms(150), participant(2), &messages.BarrierEnter{Name: "b", Label: "c", RequestId: 3})
	for i := range 3 {
		got := n.sentTo(participant(i))
		if len(got) != 1 {
			t.Fatalf("participant %d got %v", i, got)
		}
		if f, ok := got[0].(*messages.BarrierFired); !ok || f.GetEpoch() != 1 {
			t.Fatalf("participant %d got %v", i, got)
		}
	}
}

// A replica acting as primary steps down when it hears a newer epoch; a
// stale primary's forwards are answered with a sync; a gap asks for one.
func TestEpochsAndSyncs(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 4}
	n := newNet(t, 2, o, nil)
	old, backup := n.r(0), n.r(1)
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a"})
	// The backup takes over while the primary is alive (it was too slow).
	var e Effects
	backup.takeOver(ms(2), &e)
	if !backup.Acting() {
		t.Fatal("no takeover")
	}
	// The old primary still forwards at epoch 0: the new one answers with a sync.
	e2 := backup.onReplicate(ms(3), &messages.BarrierReplicate{Name: "b", Epoch: 0, FromRank: 0, Seq: 2,
		Op: &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_TICK, AtUnixNano: ms(3).UnixNano()}})
	if len(e2.Sends) != 1 || !e2.Sends[0].Msg.(*messages.BarrierReplicate).GetSync() {
		t.Fatalf("stale forward answered with %v", e2.Sends)
	}
	// Hearing it, the old primary steps down.
	e3 := old.onReplicate(ms(4), e2.Sends[0].Msg.(*messages.BarrierReplicate))
	if old.Acting() || !e3.SteppedDown || old.Epoch() != 1 {
		t.Fatalf("old primary: acting %v stepped down %v epoch %d", old.Acting(), e3.SteppedDown, old.Epoch())
	}
	sameState(t, old, backup)
	// A forward from the future (a gap) asks for a sync.
	e4 := old.onReplicate(ms(5), &messages.BarrierReplicate{Name: "b", Epoch: 1, FromRank: 1, Seq: old.Seq() + 5,
		Op: &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_TICK}})
	if len(e4.Sends) != 1 {
		t.Fatalf("gap: %v", e4.Sends)
	}
	if _, ok := e4.Sends[0].Msg.(*messages.BarrierSyncRequest); !ok {
		t.Fatalf("gap answered with %T", e4.Sends[0].Msg)
	}
	// Garbage ranks are ignored.
	if e := old.onReplicate(ms(6), &messages.BarrierReplicate{FromRank: 7}); len(e.Sends) != 0 {
		t.Fatal("bad rank acted on")
	}
}

// Queries and refusals leave no op: the primary confirms them so backups
// do not suspect it.
func TestKeepalivesConfirmQueriesAndRefusals(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 1, TakeoverAfterMs: 100}
	n := newNet(t, 2, o, nil)
	n.client(ms(1), participant(0), &messages.BarrierStatus{Name: "b", RequestId: 1})
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: ""})
	n.client(ms(2), participant(0), &messages.BarrierEnter{Name: "b", Label: "a"})
	n.client(ms(3), participant(1), &messages.BarrierEnter{Name: "b", Label: "a"}) // duplicate
	n.client(ms(4), participant(1), &messages.BarrierEnter{Name: "b", Label: "z"}) // full
	n.client(ms(5), participant(1), &messages.BarrierRelease{Name: "b", Label: "a"})
	if w := n.r(1).NextWake(); !w.IsZero() {
		t.Fatalf("backup would suspect the primary at %v; pending %v", w.Sub(t0), n.r(1).pending)
	}
	// A status query the primary never answers makes the backup suspect it.
	n.down[n.hosts[0].String()] = true
	n.client(ms(10), participant(2), &messages.BarrierStatus{Name: "b", RequestId: 9})
	if w := n.r(1).NextWake(); !w.Equal(ms(110)) {
		t.Fatalf("wake %v", w)
	}
	n.deliver(n.hosts[1], n.r(1).onTick(ms(110)))
	got := n.sentTo(participant(2))
	if len(got) != 1 {
		t.Fatalf("query after takeover: %v", got)
	}
	if s, ok := got[0].(*messages.BarrierStatusReply); !ok || s.GetEntered() != 1 || s.GetEpoch() != 1 {
		t.Fatalf("query after takeover: %v", got)
	}
}

// Closing stops every replica; later client operations are refused.
func TestCloseStopsEveryReplica(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3}
	n := newNet(t, 2, o, nil)
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a"})
	n.client(ms(2), participant(1), &messages.BarrierClose{Name: "b", RequestId: 5})
	stops := 0
	for _, e := range n.effects {
		if e.Stop {
			stops++
		}
	}
	if stops != 2 || !n.r(0).Closed() || !n.r(1).Closed() {
		t.Fatalf("stops %d", stops)
	}
	got := n.sentTo(participant(0))
	if len(got) != 1 {
		t.Fatalf("waiting participant got %v", got)
	}
	if r, ok := got[0].(*messages.BarrierRefused); !ok || r.GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("waiting participant got %v", got)
	}
	n.out = nil
	n.client(ms(3), participant(2), &messages.BarrierEnter{Name: "b", Label: "late", RequestId: 7})
	got = n.sentTo(participant(2))
	if len(got) != 1 || got[0].(*messages.BarrierRefused).GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("enter after close: %v", got)
	}
}

// A participant that asks again with the same request (its release may
// have been lost in transit) gets its outcome again; while it still
// waits, the repeat changes nothing; the same label under a new request
// is still refused.
func TestRepeatedEnterGetsItsOutcomeAgain(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 2, TakeoverAfterMs: 100}
	n := newNet(t, 2, o, nil)
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 7})
	n.client(ms(2), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 7})
	if got := n.sentTo(participant(0)); len(got) != 0 {
		t.Fatalf("a repeat while waiting was answered: %v", got)
	}
	if n.r(0).Barrier().Entered() != 1 {
		t.Fatalf("the repeat counted: %d entered", n.r(0).Barrier().Entered())
	}
	n.client(ms(3), participant(1), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 8})
	if got := n.sentTo(participant(0)); len(got) != 1 {
		t.Fatalf("fire: participant 0 got %v", got)
	}
	n.client(ms(4), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 7})
	got := n.sentTo(participant(0))
	if len(got) != 2 {
		t.Fatalf("the repeat after the fire: %v, want the outcome again", got)
	}
	if _, ok := got[1].(*messages.BarrierFired); !ok {
		t.Fatalf("the repeat after the fire got %v", got[1])
	}
	n.client(ms(5), participant(1), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 9})
	got = n.sentTo(participant(1))
	if r, ok := got[len(got)-1].(*messages.BarrierRefused); !ok || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrConflict) {
		t.Fatalf("the same label under a new request: %v, want CONFLICT", got[len(got)-1])
	}
}

// A backup that heard a client's Close answers an Open with DELETED even
// before the primary's close op reaches it: the closer may open again as
// soon as the primary answered, and a heard close always commits.
func TestBackupThatHeardACloseAnswersDeleted(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3}
	n := newNet(t, 2, o, nil)
	backup := n.r(1)
	opener := participant(1)
	open := func() *messages.BarrierCreated {
		t.Helper()
		var reply *messages.BarrierCreated
		for _, s := range backup.onCreated(nil, opener).Sends {
			if m, ok := s.Msg.(*messages.BarrierCreated); ok && pidOf(s.To).Equal(opener) {
				reply = m
			}
		}
		if reply == nil {
			t.Fatal("the backup did not answer the Open")
		}
		return reply
	}
	if got := open(); got.GetError() != nil || !got.GetExisted() {
		t.Fatalf("open before the close: %v", got)
	}
	// The closer's Close reaches the backup; the primary's op is still in
	// flight (not delivered here).
	n.deliver(n.hosts[1], backup.onClose(ms(1), &messages.BarrierClose{Name: "b", RequestId: 5}, participant(0)))
	if backup.Closed() {
		t.Fatal("the backup applied a close the primary has not committed")
	}
	if got := open(); got.GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("open with a close heard: %v, want DELETED", got)
	}
	// The primary commits it; the backup then holds it closed.
	n.deliver(n.hosts[0], n.r(0).onClose(ms(2), &messages.BarrierClose{Name: "b", RequestId: 5}, participant(0)))
	if !backup.Closed() {
		t.Fatal("the backup did not apply the primary's close")
	}
	if got := open(); got.GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("open after the close: %v, want DELETED", got)
	}
}

// A backup whose pending list is full still keeps a Close it hears: a
// close ends the barrier and must not be lost if the primary fails before
// committing it (the backup that takes over commits what it heard).
func TestFullPendingListKeepsAClose(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 2, TakeoverAfterMs: 100}
	n := newNet(t, 2, o, nil)
	n.down[n.hosts[0].String()] = true // the primary is silent
	backup := n.r(1)
	// Status queries fill the backup's pending list (each is its own key).
	for i := range 2 + extraPending + 5 {
		n.deliver(n.hosts[1], backup.onStatus(ms(1), &messages.BarrierStatus{Name: "b", RequestId: uint64(i + 1)}, participant(9)))
	}
	if got := len(backup.pending); got != 2+extraPending {
		t.Fatalf("pending list of %d, want it full at %d", got, 2+extraPending)
	}
	n.deliver(n.hosts[1], backup.onClose(ms(2), &messages.BarrierClose{Name: "b", RequestId: 77}, participant(0)))
	if len(backup.pending) > 2+extraPending {
		t.Fatalf("pending list grew to %d past its bound %d", len(backup.pending), 2+extraPending)
	}
	if got := backup.onCreated(nil, participant(1)).Sends; len(got) != 1 || got[0].Msg.(*messages.BarrierCreated).GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("open after a close was heard: %v, want DELETED", got)
	}
	// The backup takes over and commits the close it heard.
	n.deliver(n.hosts[1], backup.onTick(ms(1000)))
	if !backup.Acting() || !backup.Closed() {
		t.Fatalf("after takeover: acting %v, closed %v; the heard close was lost", backup.Acting(), backup.Closed())
	}
	// The old primary is silent, so it never acknowledges: the closer
	// hears at the deadline that the close is not known everywhere.
	if got := n.closedTo(participant(0)); len(got) != 0 {
		t.Fatalf("the closer got %v before the old primary acknowledged or the deadline", got)
	}
	n.deliver(n.hosts[1], backup.onTick(backup.NextWake()))
	got := n.closedTo(participant(0))
	if len(got) != 1 || got[0].GetRequestId() != 77 || !errors.Is(messages.ErrOrNil(got[0].GetError()), messages.ErrTimeout) {
		t.Fatalf("the closer got %v, want one BarrierClosed with TIMEOUT", got)
	}
}

// closedTo is the BarrierClosed answers sent to pid.
func (n *net) closedTo(pid *actor.PID) []*messages.BarrierClosed {
	var out []*messages.BarrierClosed
	for _, m := range n.sentTo(pid) {
		if c, ok := m.(*messages.BarrierClosed); ok {
			out = append(out, c)
		}
	}
	return out
}

// The primary answers a Close only once every backup applied it: a
// backup that has not heard it yet would answer an Open from another
// process "open" after the closer's Close returned.
func TestCloseAnswersOnceEveryBackupApplied(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3}
	n := newNet(t, 3, o, nil)
	closer := participant(0)
	// Backup 2 hears neither the closer's Close nor the primary's op yet
	// (both in flight).
	n.down[n.hosts[2].String()] = true
	n.deliver(n.hosts[1], n.r(1).onClose(ms(1), &messages.BarrierClose{Name: "b", RequestId: 5}, closer))
	n.deliver(n.hosts[0], n.r(0).onClose(ms(1), &messages.BarrierClose{Name: "b", RequestId: 5}, closer))
	if !n.r(0).Closed() || !n.r(1).Closed() {
		t.Fatal("the primary or backup 1 did not close")
	}
	if got := n.r(2).onCreated(nil, participant(1)).Sends; len(got) != 1 || got[0].Msg.(*messages.BarrierCreated).GetError() != nil {
		t.Fatalf("backup 2 (close in flight) answered %v; the test expects it to look open", got)
	}
	if got := n.closedTo(closer); len(got) != 0 {
		t.Fatalf("the closer got %v while backup 2 still answers open", got)
	}
	if n.r(0).NextWake().IsZero() {
		t.Fatal("the primary waits for acknowledgements without a deadline")
	}
	// The primary's op reaches backup 2, which applies and acknowledges it.
	var op *messages.BarrierReplicate
	for _, e := range n.effects {
		for _, s := range e.Sends {
			if m, ok := s.Msg.(*messages.BarrierReplicate); ok && pidOf(s.To).Equal(n.hosts[2]) && m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE {
				op = m
			}
		}
	}
	if op == nil {
		t.Fatal("the primary did not forward its close to backup 2")
	}
	n.down[n.hosts[2].String()] = false
	n.deliver(n.hosts[2], n.r(2).onReplicate(ms(2), op))
	if got := n.r(2).onCreated(nil, participant(1)).Sends; len(got) != 1 || got[0].Msg.(*messages.BarrierCreated).GetError().GetCode() != messages.ErrorCode_DELETED {
		t.Fatalf("backup 2 after the close: %v, want DELETED", got)
	}
	got := n.closedTo(closer)
	if len(got) != 1 || got[0].GetError() != nil || got[0].GetRequestId() != 5 {
		t.Fatalf("the closer got %v, want one BarrierClosed without error", got)
	}
	if e := n.effects[len(n.effects)-1]; !e.Stop {
		t.Fatal("the primary did not stop once every backup acknowledged")
	}
}

// A backup that does not acknowledge the close before the deadline (it
// is gone, or cut off) makes the closer's Close fail with TIMEOUT: the
// barrier is closed, but that replica may still answer it open.
func TestCloseTimesOutWithoutAnAck(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	n := newNet(t, 2, o, nil)
	closer := participant(0)
	n.down[n.hosts[1].String()] = true
	n.deliver(n.hosts[0], n.r(0).onClose(ms(1), &messages.BarrierClose{Name: "b", RequestId: 5}, closer))
	if got := n.closedTo(closer); len(got) != 0 {
		t.Fatalf("answered before any ack: %v", got)
	}
	if w := n.r(0).NextWake(); !w.Equal(ms(101)) {
		t.Fatalf("next wake %v, want the deadline %v", w, ms(101))
	}
	n.deliver(n.hosts[0], n.r(0).onTick(ms(50)))
	if got := n.closedTo(closer); len(got) != 0 {
		t.Fatalf("answered before the deadline: %v", got)
	}
	e := n.r(0).onTick(ms(101))
	n.deliver(n.hosts[0], e)
	got := n.closedTo(closer)
	if len(got) != 1 || !errors.Is(messages.ErrOrNil(got[0].GetError()), messages.ErrTimeout) || !e.Stop {
		t.Fatalf("at the deadline: %v (stop %v), want TIMEOUT and stop", got, e.Stop)
	}
	// A late ack changes nothing.
	if e := n.r(0).onCloseAck(&messages.BarrierCloseAck{Name: "b", FromRank: 1}); len(e.Sends) != 0 {
		t.Fatalf("a late ack: %v", e.Sends)
	}
}

// restart replaces replica i by one that lost its state, as its manager
// does when it panics, and delivers its sync requests.
func (n *net) restart(now time.Time, i int, o *messages.BarrierOptions) *Replica {
	r, e, err := New(Config{Name: "b", Options: o, Replicas: n.hosts, Members: []string{"node-0", "node-1", "node-2", "node-3"}[:len(n.hosts)],
		Rank: i, Restarted: true}, now)
	if err != nil {
		n.t.Fatal(err)
	}
	n.replicas[n.hosts[i].String()] = r
	n.deliver(n.hosts[i], e)
	return r
}

// A replica that restarted without state never leads on its own, however
// long the silence and however often participants ask: with no record of
// who passed or of a close, it could fire again or reopen the barrier. Its
// state comes back only from an acting primary: a state-holding backup
// ignores its sync request and syncs it once it takes over. (The chaos
// oracle relies on this: seeds 85912919137 and 85912919249 lose the primary
// and the other backup after the last replica with state crashed.)
func TestRestartedReplicaLeadsOnlyOnceSynced(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 4, TakeoverAfterMs: 100}
	for _, stateHolderLives := range []bool{false, true} {
		t.Run(fmt.Sprintf("backup with state lives=%v", stateHolderLives), func(t *testing.T) {
			n := newNet(t, 3, o, nil)
			n.down[n.hosts[0].String()] = true // the primary fails
			n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1})
			n.deliver(n.hosts[1], n.r(1).onTick(ms(101)))
			if !n.r(1).Acting() || n.r(2).Barrier().Entered() != 1 {
				t.Fatal("the first backup did not take over and sync the second")
			}
			n.client(ms(110), participant(1), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 2})
			// The acting primary crashes: the other backup holds the state
			// but does not act, so nobody answers the sync request.
			r1 := n.restart(ms(120), 1, o)
			if r1.Barrier().Entered() != 0 {
				t.Fatal("the restarted replica got a sync from a backup")
			}
			if !stateHolderLives {
				n.down[n.hosts[2].String()] = true
			}
			for k, at := range []int{200, 400, 800, 5000} {
				n.client(ms(at), participant(2+k%2), &messages.BarrierEnter{Name: "b", Label: string(rune('c' + k%2)), RequestId: uint64(3 + k%2)})
				for i := 1; i < 3; i++ {
					if !n.down[n.hosts[i].String()] {
						n.deliver(n.hosts[i], n.r(i).onTick(ms(at+300)))
					}
				}
			}
			// All the replica without state tells anyone is that it lost
			// the state (its refusals of c and d).
			var told []any
			for _, snd := range n.out {
				if r, ok := snd.Msg.(*messages.BarrierRefused); !ok || !r.GetLostState() || r.GetFromRank() != 1 {
					told = append(told, snd.Msg)
				}
			}
			if !stateHolderLives {
				if r1.Acting() || !r1.NextWake().IsZero() || len(told) != 0 || len(r1.pending) != 0 {
					t.Fatalf("a replica without state acts %v, wakes at %v, heard %d, sent %v", r1.Acting(), r1.NextWake(), len(r1.pending), told)
				}
				return
			}
			if !n.r(2).Acting() || r1.Barrier().Entered() != 4 {
				t.Fatalf("the backup with state acts %v; the restarted replica has %d entries", n.r(2).Acting(), r1.Barrier().Entered())
			}
			for i := range 4 {
				var got []any
				for _, m := range n.sentTo(participant(i)) {
					if r, ok := m.(*messages.BarrierRefused); !ok || !r.GetLostState() {
						got = append(got, m)
					}
				}
				if len(got) == 0 {
					t.Fatalf("participant %d got nothing", i)
				} else if _, ok := got[0].(*messages.BarrierFired); !ok {
					t.Fatalf("participant %d got %v", i, got)
				}
			}
		})
	}
}

// After a takeover the old primary never acknowledges a close: the new
// primary answers the closer once every replica acknowledged it or was
// declared failed (MemberDown), whichever order the failure notice and
// the close come in; a failed member that hosts no replica, another
// incarnation of a replica's member name, or an ack still missing from a
// live one, settles nothing.
func TestCloseWaitsOnlyForLiveReplicas(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	for _, downFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("notice before close=%v", downFirst), func(t *testing.T) {
			n := newNet(t, 3, o, nil)
			closer := participant(0)
			n.down[n.hosts[0].String()] = true // the primary fails
			n.client(ms(1), participant(1), &messages.BarrierStatus{Name: "b", RequestId: 1})
			n.deliver(n.hosts[1], n.r(1).onTick(ms(101)))
			if !n.r(1).Acting() {
				t.Fatal("backup 1 did not take over")
			}
			if downFirst {
				n.deliver(n.hosts[1], n.r(1).onMemberDown("node-0", "nonhost"))
			}
			n.deliver(n.hosts[1], n.r(1).onMemberDown("node-7", "nonhost"))   // hosts no replica of b
			n.deliver(n.hosts[1], n.r(1).onMemberDown("node-0", "elsewhere")) // another incarnation of the name
			// Backup 2 hears the close only later.
			n.down[n.hosts[2].String()] = true
			n.client(ms(110), closer, &messages.BarrierClose{Name: "b", RequestId: 5})
			if got := n.closedTo(closer); len(got) != 0 {
				t.Fatalf("answered while live backup 2 had not applied the close: %v", got)
			}
			var op *messages.BarrierReplicate
			for _, e := range n.effects {
				for _, s := range e.Sends {
					if m, ok := s.Msg.(*messages.BarrierReplicate); ok && pidOf(s.To).Equal(n.hosts[2]) && m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE {
						op = m
					}
				}
			}
			if op == nil {
				t.Fatal("the new primary did not forward its close to backup 2")
			}
			n.down[n.hosts[2].String()] = false
			n.deliver(n.hosts[2], n.r(2).onReplicate(ms(111), op))
			if !downFirst {
				if got := n.closedTo(closer); len(got) != 0 {
					t.Fatalf("answered before the old primary acknowledged or was declared failed: %v", got)
				}
				n.deliver(n.hosts[1], n.r(1).onMemberDown("node-0", "nonhost"))
			}
			got := n.closedTo(closer)
			if len(got) != 1 || got[0].GetError() != nil || got[0].GetRequestId() != 5 {
				t.Fatalf("the closer got %v, want one BarrierClosed without error", got)
			}
			if e := n.effects[len(n.effects)-1]; !e.Stop {
				t.Fatal("the new primary did not stop once the close settled")
			}
		})
	}
}

// A backup's full pending list sheds status queries, never an operation
// that changes the barrier: a Close heard when the list is full keeps the
// Enter that fired the barrier (it was the newest op, and was the one
// replaced), and Enters heard when queries fill the list are kept too.
// After the takeover both labels pass, then the barrier closes.
func TestFullPendingListShedsQueriesNotOperations(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 2, TakeoverAfterMs: 100}
	limit := 2 + extraPending
	for _, queries := range []int{limit - 2, limit + 5} {
		t.Run(fmt.Sprintf("%d queries first", queries), func(t *testing.T) {
			n := newNet(t, 2, o, nil)
			n.down[n.hosts[0].String()] = true // the primary is silent
			backup := n.r(1)
			for i := range queries { // the first at 1 ms, the rest at 2 ms
				n.deliver(n.hosts[1], backup.onStatus(ms(1+min(i, 1)), &messages.BarrierStatus{Name: "b", RequestId: uint64(i + 1)}, participant(9)))
			}
			// The second Enter fires the barrier (Max 2); the Close comes after.
			n.deliver(n.hosts[1], backup.onEnter(ms(2), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1001}, participant(0)))
			n.deliver(n.hosts[1], backup.onEnter(ms(3), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 1002}, participant(1)))
			n.deliver(n.hosts[1], backup.onClose(ms(4), &messages.BarrierClose{Name: "b", RequestId: 77}, participant(2)))
			if len(backup.pending) > limit {
				t.Fatalf("pending list grew to %d past its bound %d", len(backup.pending), limit)
			}
			if w := backup.NextWake(); !w.Equal(ms(101)) {
				t.Fatalf("takeover at %v, want %v: shedding the oldest query must not put it off", w.Sub(t0), ms(101).Sub(t0))
			}
			n.deliver(n.hosts[1], backup.onTick(ms(1000)))
			if !backup.Acting() || !backup.Closed() {
				t.Fatalf("after takeover: acting %v, closed %v", backup.Acting(), backup.Closed())
			}
			for i := range 2 {
				got := n.sentTo(participant(i))
				if len(got) != 1 {
					t.Fatalf("participant %d got %v, want its FIRE", i, got)
				}
				if _, ok := got[0].(*messages.BarrierFired); !ok {
					t.Fatalf("participant %d got %v, want its FIRE (the close came after the barrier fired)", i, got)
				}
			}
		})
	}
}

// A replica that lost its state refuses an Enter with lost_state and its
// rank, every time it is asked, and neither hears nor commits it; once an
// acting primary synced it, it stays quiet as a backup again.
func TestReplicaWithoutStateSaysSo(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	n := newNet(t, 3, o, nil)
	n.down[n.hosts[0].String()] = true // the primary does not answer the sync request yet
	r2 := n.restart(ms(1), 2, o)
	enter := &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 7}
	for range 2 { // a participant asks again while it waits
		n.deliver(n.hosts[2], r2.onEnter(ms(2), enter, participant(0)))
	}
	got := n.sentTo(participant(0))
	if len(got) != 2 {
		t.Fatalf("participant got %v, want two refusals", got)
	}
	for _, m := range got {
		r, ok := m.(*messages.BarrierRefused)
		if !ok || !r.GetLostState() || r.GetFromRank() != 2 || r.GetRequestId() != 7 || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrUnavailable) {
			t.Fatalf("participant got %v, want UNAVAILABLE refusals with lost_state from rank 2", m)
		}
	}
	if len(r2.pending) != 0 || r2.Acting() || r2.Barrier().Entered() != 0 {
		t.Fatalf("the replica without state heard %d ops, acts %v, entered %d", len(r2.pending), r2.Acting(), r2.Barrier().Entered())
	}
	// The primary answers the sync request now; the replica is a backup
	// with state again and leaves the answer to the primary.
	n.down[n.hosts[0].String()] = false
	n.deliver(n.hosts[0], n.r(0).onSyncRequest(&messages.BarrierSyncRequest{Name: "b", FromRank: 2}))
	n.out = nil
	n.deliver(n.hosts[2], r2.onEnter(ms(3), enter, participant(0)))
	if got := n.sentTo(participant(0)); len(got) != 0 {
		t.Fatalf("a synced backup answered %v", got)
	}
}

// A barrier's only replica that restarted (its manager crashed) holds no
// state and has nobody to sync from: it must not act as the primary, or
// it would fire a fired barrier again, or answer a closed one open. It
// refuses every Enter as a replica that lost the state, which with one
// replica fails the Enter at once (handle.Participant.Refused).
func TestOnlyReplicaRestartedLeadsNothing(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 1, TakeoverAfterMs: 100}
	n := newNet(t, 1, o, nil)
	enter := &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1}
	n.deliver(n.hosts[0], n.r(0).onEnter(ms(1), enter, participant(0)))
	if fired, _ := n.r(0).Barrier().Fired(); !fired {
		t.Fatal("the barrier of one did not fire on its Enter")
	}
	r := n.restart(ms(2), 0, o)
	n.out = nil
	again := &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 2}
	n.deliver(n.hosts[0], r.onEnter(ms(3), again, participant(1)))
	n.deliver(n.hosts[0], r.onTick(ms(1000)))
	if r.Acting() || r.Barrier().Entered() != 0 {
		t.Fatalf("the restarted only replica acts %v with %d entered", r.Acting(), r.Barrier().Entered())
	}
	got := n.sentTo(participant(1))
	if len(got) != 1 {
		t.Fatalf("participant got %v, want one refusal", got)
	}
	if m, ok := got[0].(*messages.BarrierRefused); !ok || !m.GetLostState() || !errors.Is(messages.ErrOrNil(m.GetError()), messages.ErrUnavailable) {
		t.Fatalf("participant got %v, want an UNAVAILABLE refusal with lost_state", got[0])
	}
}

// A replica that lost its state answers a Release, a Close and a Status
// query with lost_state and its rank, as it refuses an Enter, and hears
// none of them: the handle fails such a call at once when every replica
// says so. (It kept quiet, and a call to a barrier whose every replica
// lost its state waited for its deadline.)
func TestReplicaWithoutStateAnswersCalls(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	n := newNet(t, 3, o, nil)
	n.down[n.hosts[0].String()] = true // nobody syncs the restarted replica
	r2 := n.restart(ms(1), 2, o)
	n.out = nil
	n.deliver(n.hosts[2], r2.onRelease(ms(2), &messages.BarrierRelease{Name: "b", Label: "a", RequestId: 4}, participant(0)))
	n.deliver(n.hosts[2], r2.onClose(ms(2), &messages.BarrierClose{Name: "b", RequestId: 5}, participant(0)))
	n.deliver(n.hosts[2], r2.onStatus(ms(2), &messages.BarrierStatus{Name: "b", RequestId: 6}, participant(0)))
	got := n.sentTo(participant(0))
	if len(got) != 3 {
		t.Fatalf("participant got %v, want three answers", got)
	}
	for i, m := range got {
		var rank int32
		var lost bool
		var err *messages.Error
		var id uint64
		switch r := m.(type) {
		case *messages.BarrierReleased:
			rank, lost, err, id = r.GetFromRank(), r.GetLostState(), r.GetError(), r.GetRequestId()
		case *messages.BarrierClosed:
			rank, lost, err, id = r.GetFromRank(), r.GetLostState(), r.GetError(), r.GetRequestId()
		case *messages.BarrierStatusReply:
			rank, lost, err, id = r.GetFromRank(), r.GetLostState(), r.GetError(), r.GetRequestId()
		}
		if !lost || rank != 2 || id != uint64(4+i) || !errors.Is(messages.ErrOrNil(err), messages.ErrUnavailable) {
			t.Fatalf("answer %d: %v, want UNAVAILABLE with lost_state from rank 2 to request %d", i, m, 4+i)
		}
	}
	if len(r2.pending) != 0 || r2.Closed() {
		t.Fatalf("the replica without state heard %d ops (closed %v)", len(r2.pending), r2.Closed())
	}
}

// A backup that takes over while the primary is only slow may lack what
// the primary decided: here the primary fired a barrier of three with two
// entries the backup never heard (its host had no manager for the barrier
// yet) and told the participants, and the backup took over with the third
// alone. The old primary, and the other backup, adopt the new primary's
// state and hand over what it lacks, and the new primary applies it: the
// barrier fires there too, and the third label, whose FIRE from the old
// primary was lost, passes when it asks again. (Its two peers had passed
// and asked no more: the new primary never reached three, and the third
// waited for its deadline although every replica lived; chaos seeds 38
// and 68.)
func TestTakeoverKeepsWhatTheSlowPrimaryDecided(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	n := newNet(t, 3, o, nil)
	n.fifo = true
	n.cut = map[string]bool{n.hosts[0].String() + ">" + n.hosts[1].String(): true} // the primary's messages to replica 1 are lost
	enter := func(at time.Time, i int, ranks ...int) {
		m := &messages.BarrierEnter{Name: "b", Label: fmt.Sprintf("l%d", i), Host: "h", RequestId: 1}
		for _, rank := range ranks {
			n.deliver(n.hosts[rank], n.r(rank).onEnter(at, m, participant(i)))
		}
	}
	enter(ms(1), 0, 0, 2) // replica 1 never hears l0 and l1
	enter(ms(2), 1, 0, 2)
	enter(ms(3), 2, 0, 1, 2)
	if fired, _ := n.r(0).Barrier().Fired(); !fired {
		t.Fatal("the primary did not fire with three entries")
	}
	// Replica 1 heard l2 and nothing from the primary: it takes over.
	// (What the primary sent it meanwhile is lost; it reaches it again.)
	n.cut = nil
	n.now = ms(200)
	n.deliver(n.hosts[1], n.r(1).onTick(ms(200)))
	if !n.r(1).Acting() || n.r(0).Acting() {
		t.Fatalf("acting: replica 0 %v, replica 1 %v; want replica 1 alone", n.r(0).Acting(), n.r(1).Acting())
	}
	// l2's FIRE from the old primary was lost in transit: it asks again.
	enter(ms(300), 2, 0, 1, 2)
	var fires []*messages.BarrierFired
	for _, m := range n.sentTo(participant(2)) {
		if f, ok := m.(*messages.BarrierFired); ok && f.GetEpoch() == 1 {
			fires = append(fires, f)
		}
	}
	if len(fires) == 0 {
		t.Fatalf("l2 was never told it passed by the new primary (entered there: %d)", n.r(1).Barrier().Entered())
	}
	sameState(t, n.r(1), n.r(0))
	sameState(t, n.r(1), n.r(2))
}

// A creator asking again (barrier.New asks until it hears an answer, and
// the first answer may have been lost) is answered as the first time: the
// barrier is its, new. Another creator's create finds it existing.
func TestCreatorAskingAgainCreatedIt(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3}
	ctrl, other := actor.NewPID("nonhost", "creator"), actor.NewPID("nonhost", "other")
	hosts := []*actor.PID{actor.NewPID("nonhost", "node-0/barriers")}
	r, _, err := New(Config{Name: "b", Options: o, Replicas: hosts, Rank: 0, Controller: ctrl}, t0)
	if err != nil {
		t.Fatal(err)
	}
	create := func(controller *actor.PID) *messages.BarrierCreated {
		t.Helper()
		e := r.onCreated(&messages.BarrierCreate{Name: "b", Options: o, Controller: Peer(controller)}, participant(0))
		if len(e.Sends) != 1 {
			t.Fatalf("create answered %v", e.Sends)
		}
		return e.Sends[0].Msg.(*messages.BarrierCreated)
	}
	for i := range 2 {
		if c := create(ctrl); c.GetError() != nil || c.GetExisted() {
			t.Fatalf("the creator's create %d: %v, want created", i, c)
		}
	}
	if c := create(other); c.GetError() != nil || !c.GetExisted() {
		t.Fatalf("another creator's create: %v, want existed", c)
	}
	if c := create(nil); c.GetError() != nil || !c.GetExisted() {
		t.Fatalf("a create without a controller: %v, want existed", c)
	}
}

// The replica asks its shell (in the Box) to watch each participant it
// hears from, once: a second Enter from the same participant asks
// nothing more.
func TestReplicaWatchesEachParticipantOnce(t *testing.T) {
	r, _, err := New(Config{Name: "b", Options: &messages.BarrierOptions{MaxParticipants: 4},
		Replicas: []*actor.PID{actor.NewPID("nonhost", "node-0/barriers")}, Members: []string{"node-0"}}, t0)
	if err != nil {
		t.Fatal(err)
	}
	e := r.onEnter(ms(1), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1}, participant(0))
	if len(e.Watch) != 1 || e.Watch[0].(*actor.PID).String() != participant(0).String() {
		t.Fatalf("first Enter of p0: watch %v, want p0", e.Watch)
	}
	if e := r.onEnter(ms(2), &messages.BarrierEnter{Name: "b", Label: "b", RequestId: 2}, participant(0)); len(e.Watch) != 0 {
		t.Fatalf("second Enter of p0: watch %v, want none", e.Watch)
	}
	if e := r.onEnter(ms(3), &messages.BarrierEnter{Name: "b", Label: "c", RequestId: 3}, participant(1)); len(e.Watch) != 1 {
		t.Fatalf("first Enter of p1: watch %v, want p1", e.Watch)
	}
}

// A backup that had not learnt of the holder's admission when the primary
// died ignores the holder's Release; the new primary admits the holder
// again, and the handle's repeated Release (it asks again until answered)
// frees the slot. Asked once more, that Release succeeds again; another
// Release of the label is refused.
func TestReleaseAskedAgainAfterATakeoverFreesTheSlot(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 4, TakeoverAfterMs: 100, Semaphore: &messages.BarrierSemaphore{Count: 1}}
	n := newNet(t, 2, o, nil)
	n.cut = map[string]bool{n.hosts[0].String() + ">" + n.hosts[1].String(): true} // the primary's forwards are lost
	n.client(ms(1), participant(0), &messages.BarrierEnter{Name: "b", Label: "a", RequestId: 1})
	n.client(ms(2), participant(1), &messages.BarrierEnter{Name: "b", Label: "w", RequestId: 2})
	if got := n.sentTo(participant(0)); len(got) != 1 {
		t.Fatalf("the holder got %v, want its admission", got)
	}
	n.down[n.hosts[0].String()] = true
	release := &messages.BarrierRelease{Name: "b", Label: "a", RequestId: 3}
	n.client(ms(3), participant(0), release)
	if got := n.sentTo(participant(0)); len(got) != 1 {
		t.Fatalf("a backup that never saw the admission answered the Release: %v", got)
	}
	b := n.r(1)
	n.deliver(n.hosts[1], b.onTick(b.NextWake()))
	if !b.Acting() {
		t.Fatal("the backup did not take over")
	}
	if got := n.sentTo(participant(1)); len(got) != 0 {
		t.Fatalf("w admitted while a holds the section: %v", got)
	}
	n.client(b.NextWake(), participant(0), release)
	got := n.sentTo(participant(0))
	if r, ok := got[len(got)-1].(*messages.BarrierReleased); !ok || r.GetError() != nil || r.GetRequestId() != 3 {
		t.Fatalf("the repeated Release: %v, want it answered without error", got[len(got)-1])
	}
	if got := n.sentTo(participant(1)); len(got) != 1 {
		t.Fatalf("w after the release: %v, want its admission", got)
	}
	n.client(b.NextWake(), participant(0), release)
	got = n.sentTo(participant(0))
	if r, ok := got[len(got)-1].(*messages.BarrierReleased); !ok || r.GetError() != nil {
		t.Fatalf("the same Release asked once more: %v, want it answered without error", got[len(got)-1])
	}
	n.client(b.NextWake(), participant(0), &messages.BarrierRelease{Name: "b", Label: "a", RequestId: 4})
	got = n.sentTo(participant(0))
	if r, ok := got[len(got)-1].(*messages.BarrierReleased); !ok || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrConflict) {
		t.Fatalf("a second Release: %v, want CONFLICT", got[len(got)-1])
	}
}
