package barrier

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// Messages from the API to a handle's participant actor.
type (
	setup struct {
		replicas  []*actor.PID
		max       int
		semaphore bool
	}
	enterReq struct {
		id          uint64
		label, host string
		ch          chan<- enterResult
	}
	callReq struct {
		id    uint64
		build func(id uint64, rank int32) proto.Message
		ch    chan<- proto.Message
	}
	cancelReq struct {
		id    uint64
		label string        // "" for a call
		done  chan struct{} // closed once withdrawn (nil: no one waits)
	}
	// reask: the waiting Enters ask the replicas again.
	reask struct{}
)

// reaskEvery is how often a waiting Enter asks again: a release is one
// message, and one lost in transit (an endpoint that broke under load)
// would otherwise leave the label waiting until its deadline. A replica
// answers a repeated Enter with the label's outcome, or not at all while
// it still waits.
const reaskEvery = time.Second

type outcomeKind uint8

const (
	kindFired outcomeKind = iota + 1
	kindLate
	kindCatchUp
)

type enterResult struct {
	kind   outcomeKind
	reason string
	err    error
}

type waiter struct {
	id uint64
	ch chan<- enterResult
}

// participant is a handle's actor: it sends each request to every replica,
// matches the answers with the waiting calls, ignores duplicates, and runs
// the controller's callbacks. The managers watch it: when it stops, its
// labels count as failed participants.
type participant struct {
	name      string
	replicas  []*actor.PID
	max       int
	semaphore bool
	enters    map[string]waiter // label -> waiting Enter
	calls     map[uint64]chan<- proto.Message
	done      map[string]outcomeKind // labels answered (bounded by max)
	onEnter   func(Consultation) bool
	onFailure func(Failure)
	counters  *counters
	reasking  *time.Timer // armed while an Enter waits
	entering  map[string]*messages.BarrierEnter
	// notFound counts, per waiting label, the replicas that answered its
	// latest round of Enters NOT_FOUND. A host answers so while it has no
	// manager for the barrier (its replica crashed and is being rebuilt,
	// or its member restarted): only when every replica says so does the
	// barrier not exist.
	notFound map[string]int
}

func (p *participant) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.enters, p.calls, p.done = map[string]waiter{}, map[uint64]chan<- proto.Message{}, map[string]outcomeKind{}
		p.entering, p.notFound = map[string]*messages.BarrierEnter{}, map[string]int{}
	case setup:
		p.replicas, p.max, p.semaphore = m.replicas, m.max, m.semaphore
	case enterReq:
		if w, ok := p.enters[m.label]; ok && w.id != m.id {
			m.ch <- enterResult{err: messages.Errorf(messages.ErrorCode_CONFLICT, "label %q is already entering barrier %q", m.label, p.name)}
			return
		}
		p.enters[m.label] = waiter{id: m.id, ch: m.ch}
		enter := &messages.BarrierEnter{Name: p.name, Label: m.label, Host: m.host, RequestId: m.id}
		p.entering[m.label] = enter
		p.sendEnter(ctx, enter)
		p.armReask(ctx)
	case reask:
		p.reasking = nil
		for l, enter := range p.entering {
			if _, waiting := p.enters[l]; !waiting {
				delete(p.entering, l)
				continue
			}
			p.sendEnter(ctx, enter)
		}
		p.armReask(ctx)
	case callReq:
		p.calls[m.id] = m.ch
		for rank, r := range p.replicas {
			ctx.Request(r, m.build(m.id, int32(rank)))
		}
	case cancelReq:
		if w, ok := p.enters[m.label]; ok && m.label != "" && w.id == m.id {
			delete(p.enters, m.label)
			delete(p.notFound, m.label)
		}
		delete(p.calls, m.id)
		if m.done != nil {
			close(m.done)
		}
	case *messages.BarrierFired:
		p.outcome(ctx, m.GetLabel(), kindFired, m.GetReason())
	case *messages.BarrierLateFire:
		p.outcome(ctx, m.GetLabel(), kindLate, "")
	case *messages.BarrierCatchUp:
		p.outcome(ctx, m.GetLabel(), kindCatchUp, "")
	case *messages.BarrierRefused:
		if w, ok := p.enters[m.GetLabel()]; ok && (m.GetRequestId() == 0 || m.GetRequestId() == w.id) {
			if errors.Is(messages.ErrOrNil(m.GetError()), messages.ErrNotFound) {
				if p.notFound[m.GetLabel()]++; p.notFound[m.GetLabel()] < len(p.replicas) {
					return // another replica may know it; the next round asks again
				}
			}
			delete(p.enters, m.GetLabel())
			delete(p.notFound, m.GetLabel())
			w.ch <- enterResult{err: errOr(m.GetError())}
		}
	case *messages.BarrierTimedOut:
		p.counters.timedOut.Add(1)
	case *messages.BarrierReleased:
		p.answer(m.GetRequestId(), m)
	case *messages.BarrierClosed:
		p.answer(m.GetRequestId(), m)
	case *messages.BarrierStatusReply:
		p.answer(m.GetRequestId(), m)
	case *messages.BarrierConsult:
		ctx.Respond(&messages.BarrierDecide{Name: p.name, Id: m.GetId(), Fire: p.consult(ctx, m)})
	case *messages.BarrierFailure:
		if p.onFailure != nil {
			p.safely(ctx, "OnFailure", func() {
				p.onFailure(Failure{Barrier: p.name, Label: m.GetLabel(), Host: m.GetHost(), Reason: m.GetReason()})
			})
		}
	case *actor.Stopping:
		if p.reasking != nil {
			p.reasking.Stop()
		}
		for l, w := range p.enters {
			w.ch <- enterResult{err: messages.Errorf(messages.ErrorCode_CANCELED, "barrier %q: handle stopped while %q waited", p.name, l)}
		}
		for _, ch := range p.calls {
			ch <- nil
		}
		clear(p.enters)
		clear(p.calls)
	}
}

// sendEnter asks every replica (only the acting primary answers).
func (p *participant) sendEnter(ctx actor.Context, enter *messages.BarrierEnter) {
	p.notFound[enter.GetLabel()] = 0
	for rank, r := range p.replicas {
		m := proto.Clone(enter).(*messages.BarrierEnter)
		m.ToRank = int32(rank)
		ctx.Request(r, m)
	}
}

// armReask keeps one timer while any Enter waits.
func (p *participant) armReask(ctx actor.Context) {
	if p.reasking != nil || len(p.enters) == 0 {
		return
	}
	sys, self := ctx.ActorSystem(), ctx.Self()
	p.reasking = time.AfterFunc(reaskEvery, func() { sys.Root.Send(self, reask{}) })
}

func (p *participant) outcome(ctx actor.Context, label string, kind outcomeKind, reason string) {
	if w, ok := p.enters[label]; ok {
		delete(p.enters, label)
		delete(p.notFound, label)
		w.ch <- enterResult{kind: kind, reason: reason}
		if len(p.done) < max(p.max, 1) {
			p.done[label] = kind
		}
		return
	}
	switch prev, ok := p.done[label]; {
	case ok && prev == kind:
		p.counters.dup.Add(1) // clients ignore duplicate FIRE messages
	case ok:
		p.counters.conflict.Add(1)
	default:
		p.counters.orphan.Add(1)
		if p.semaphore && kind == kindFired {
			// Admitted, but its Enter gave up waiting: nobody will use the
			// slot, so give it back.
			if len(p.done) < max(p.max, 1) {
				p.done[label] = kind
			}
			for rank, r := range p.replicas {
				ctx.Request(r, &messages.BarrierRelease{Name: p.name, Label: label, ToRank: int32(rank)})
			}
		}
	}
}

func (p *participant) answer(id uint64, m proto.Message) {
	if ch, ok := p.calls[id]; ok {
		delete(p.calls, id)
		ch <- m
	}
}

func (p *participant) consult(ctx actor.Context, m *messages.BarrierConsult) bool {
	fire := m.GetDefaultFire()
	if p.onEnter == nil {
		return fire
	}
	c := Consultation{Label: m.GetLabel(), Host: m.GetHost(), Default: m.GetDefaultFire(), Reason: m.GetReason(),
		Knee: m.GetKnee(), KneeArrivals: int(m.GetKneeArrivals()), Entered: int(m.GetEntered())}
	p.safely(ctx, "OnEnter", func() { fire = p.onEnter(c) })
	return fire
}

// safely runs an application callback; a panic is logged, not fatal to
// the handle.
func (p *participant) safely(ctx actor.Context, what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			ctx.Logger().Error("barrier callback panicked", "barrier", p.name, "callback", what, "panic", fmt.Sprint(r))
		}
	}()
	f()
}

func errOr(e *messages.Error) error {
	if err := messages.ErrOrNil(e); err != nil {
		return err
	}
	return messages.Errorf(messages.ErrorCode_INTERNAL, "refused without an error")
}
