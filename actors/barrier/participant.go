package barrier

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// The messages a barrier handle (package barrier) sends its participant
// actor. They never cross a process: the replies travel on channels.
type (
	// Setup names the barrier's replicas once it was created or opened.
	Setup struct {
		Replicas  []*actor.PID
		Max       int
		Semaphore bool
	}
	// EnterRequest enters Label; its outcome comes back on Reply.
	EnterRequest struct {
		ID          uint64
		Label, Host string
		Reply       chan<- EnterResult
	}
	// CallRequest sends Build's message to every replica; the acting
	// primary's answer (or nil if the handle stops) comes back on Reply.
	CallRequest struct {
		ID    uint64
		Build func(id uint64, rank int32) proto.Message
		Reply chan<- proto.Message
	}
	// CancelRequest withdraws a waiting Enter (Label set) or call; Done,
	// if not nil, is closed once it is withdrawn.
	CancelRequest struct {
		ID    uint64
		Label string
		Done  chan struct{}
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

// Outcome is how an Enter passed.
type Outcome uint8

// The outcomes of an Enter.
const (
	Fired Outcome = iota + 1
	Late
	CatchUp
)

// EnterResult answers an EnterRequest: an outcome, or Err.
type EnterResult struct {
	Kind   Outcome
	Reason string
	Err    error
}

// Consultation is what the entry callback is asked.
type Consultation struct {
	// Label and Host of the entry that caused it; empty when it was caused
	// by time (a knee, MinWait, or the callback timeout).
	Label, Host string
	// Default is what the barrier would do without the callback: fire now
	// or not; Reason is the rule behind a true Default.
	Default bool
	Reason  string
	// Knee: a knee in the arrivals just became acceptable, after
	// KneeArrivals arrivals.
	Knee         bool
	KneeArrivals int
	// Entered is the number of labels entered so far.
	Entered int
}

// Failure is a participant the manager could not serve.
type Failure struct {
	Barrier, Label, Host, Reason string
}

// Counters count what a handle ignored; the handle reads them.
type Counters struct{ Dup, Conflict, Orphan, TimedOut atomic.Int64 }

// ParticipantConfig configures the participant actor of one handle.
type ParticipantConfig struct {
	Name      string
	OnEnter   func(Consultation) bool
	OnFailure func(Failure)
	Counters  *Counters
}

// NewParticipantProps returns the props of a handle's participant actor.
func NewParticipantProps(cfg ParticipantConfig) *actor.Props {
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &participant{name: cfg.Name, onEnter: cfg.OnEnter, onFailure: cfg.OnFailure, counters: cfg.Counters}
	})
}

type waiter struct {
	id uint64
	ch chan<- EnterResult
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
	done      map[string]Outcome // labels answered (bounded by max)
	onEnter   func(Consultation) bool
	onFailure func(Failure)
	counters  *Counters
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
		p.enters, p.calls, p.done = map[string]waiter{}, map[uint64]chan<- proto.Message{}, map[string]Outcome{}
		p.entering, p.notFound = map[string]*messages.BarrierEnter{}, map[string]int{}
	case Setup:
		p.replicas, p.max, p.semaphore = m.Replicas, m.Max, m.Semaphore
	case EnterRequest:
		if w, ok := p.enters[m.Label]; ok && w.id != m.ID {
			m.Reply <- EnterResult{Err: messages.Errorf(messages.ErrorCode_CONFLICT, "label %q is already entering barrier %q", m.Label, p.name)}
			return
		}
		p.enters[m.Label] = waiter{id: m.ID, ch: m.Reply}
		enter := &messages.BarrierEnter{Name: p.name, Label: m.Label, Host: m.Host, RequestId: m.ID}
		p.entering[m.Label] = enter
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
	case CallRequest:
		p.calls[m.ID] = m.Reply
		for rank, r := range p.replicas {
			ctx.Request(r, m.Build(m.ID, int32(rank)))
		}
	case CancelRequest:
		if w, ok := p.enters[m.Label]; ok && m.Label != "" && w.id == m.ID {
			delete(p.enters, m.Label)
			delete(p.notFound, m.Label)
		}
		delete(p.calls, m.ID)
		if m.Done != nil {
			close(m.Done)
		}
	case *messages.BarrierFired:
		p.outcome(ctx, m.GetLabel(), Fired, m.GetReason())
	case *messages.BarrierLateFire:
		p.outcome(ctx, m.GetLabel(), Late, "")
	case *messages.BarrierCatchUp:
		p.outcome(ctx, m.GetLabel(), CatchUp, "")
	case *messages.BarrierRefused:
		if w, ok := p.enters[m.GetLabel()]; ok && (m.GetRequestId() == 0 || m.GetRequestId() == w.id) {
			if errors.Is(messages.ErrOrNil(m.GetError()), messages.ErrNotFound) {
				if p.notFound[m.GetLabel()]++; p.notFound[m.GetLabel()] < len(p.replicas) {
					return // another replica may know it; the next round asks again
				}
			}
			delete(p.enters, m.GetLabel())
			delete(p.notFound, m.GetLabel())
			w.ch <- EnterResult{Err: errOr(m.GetError())}
		}
	case *messages.BarrierTimedOut:
		p.counters.TimedOut.Add(1)
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
			w.ch <- EnterResult{Err: messages.Errorf(messages.ErrorCode_CANCELED, "barrier %q: handle stopped while %q waited", p.name, l)}
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

func (p *participant) outcome(ctx actor.Context, label string, kind Outcome, reason string) {
	if w, ok := p.enters[label]; ok {
		delete(p.enters, label)
		delete(p.notFound, label)
		w.ch <- EnterResult{Kind: kind, Reason: reason}
		if len(p.done) < max(p.max, 1) {
			p.done[label] = kind
		}
		return
	}
	switch prev, ok := p.done[label]; {
	case ok && prev == kind:
		p.counters.Dup.Add(1) // clients ignore duplicate FIRE messages
	case ok:
		p.counters.Conflict.Add(1)
	default:
		p.counters.Orphan.Add(1)
		if p.semaphore && kind == Fired {
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
