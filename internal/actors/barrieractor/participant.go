package barrieractor

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/handle"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// The contract with the handle (package barrier) is package participant;
// these names are its types.
type (
	// Setup names the barrier's replicas (participant.Setup).
	Setup = participant.Setup
	// EnterRequest enters a label (participant.EnterRequest).
	EnterRequest = participant.EnterRequest
	// CallRequest asks every replica (participant.CallRequest).
	CallRequest = participant.CallRequest
	// CancelRequest withdraws a call (participant.CancelRequest).
	CancelRequest = participant.CancelRequest
	// EnterResult answers an EnterRequest (participant.EnterResult).
	EnterResult = participant.EnterResult
	// Consultation is what the entry callback is asked.
	Consultation = participant.Consultation
	// Failure is a participant the manager could not serve.
	Failure = participant.Failure
	// Counters count what a handle ignored.
	Counters = participant.Counters
	// ParticipantConfig configures the participant actor of one handle.
	ParticipantConfig = participant.Config
)

// NewParticipantProps returns the props of a handle's participant actor.
func NewParticipantProps(cfg ParticipantConfig) *actor.Props {
	if cfg.Counters == nil {
		cfg.Counters = &Counters{}
	}
	return actorutil.Props(func() actor.Actor {
		return &participantActor{name: cfg.Name, onEnter: cfg.OnEnter, onFailure: cfg.OnFailure, counters: cfg.Counters, gone: cfg.Gone}
	})
}

// participantActor is a handle's actor: the shell around a handle.Participant,
// which sends each request to every replica, matches the answers with the
// waiting calls and ignores duplicates. The shell keeps the calls'
// channels, counts what was ignored, and runs the controller's callbacks.
// The managers watch it: when it stops, its labels count as failed
// participants.
type participantActor struct {
	name      string
	core      *handle.Participant
	replicas  []*actor.PID
	tree      []*actor.PID // the barrier hosts of the combining tree, by position
	shape     *messages.BarrierTreeShape
	enters    map[uint64]chan<- EnterResult
	calls     map[uint64]chan<- proto.Message
	onEnter   func(Consultation) bool
	onFailure func(Failure)
	counters  *Counters
	reasking  *time.Timer // armed while an Enter waits
	gone      chan struct{}
}

func (p *participantActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.started()
	case Setup:
		p.setup(m)
	case EnterRequest:
		p.enters[m.ID] = m.Reply
		p.step(ctx, handle.Enter{ID: m.ID, Label: m.Label, Host: m.Host})
	case handle.Reask:
		p.reasking = nil
		p.step(ctx, m)
	case CallRequest:
		p.calls[m.ID] = m.Reply
		p.step(ctx, handle.Call{ID: m.ID, Msgs: p.build(m)})
	case CancelRequest:
		p.cancel(m)
	case *messages.BarrierFired:
		p.step(ctx, handle.Passed{Label: m.GetLabel(), Kind: handle.Fired, Reason: m.GetReason()})
	case *messages.BarrierLateFire:
		p.step(ctx, handle.Passed{Label: m.GetLabel(), Kind: handle.Late})
	case *messages.BarrierCatchUp:
		p.step(ctx, handle.Passed{Label: m.GetLabel(), Kind: handle.CatchUp})
	case *messages.BarrierRefused:
		p.step(ctx, m)
	case *messages.BarrierTimedOut:
		p.counters.TimedOut.Add(1)
	case *messages.BarrierReleased:
		p.step(ctx, handle.Answered{ID: m.GetRequestId(), Msg: m})
	case *messages.BarrierClosed:
		p.step(ctx, handle.Answered{ID: m.GetRequestId(), Msg: m})
	case *messages.BarrierStatusReply:
		p.step(ctx, handle.Answered{ID: m.GetRequestId(), Msg: m})
	case *messages.BarrierConsult:
		ctx.Respond(&messages.BarrierDecide{Name: p.name, Id: m.GetId(), Fire: p.consult(ctx, m)})
	case *messages.BarrierFailure:
		p.failure(ctx, m)
	case *actor.Stopping:
		if p.reasking != nil {
			p.reasking.Stop()
		}
		p.step(ctx, handle.Stop{})
	case *actor.Stopped:
		if p.gone != nil {
			close(p.gone)
		}
	}
}

func (p *participantActor) started() {
	p.core = handle.New(p.name)
	p.enters, p.calls = map[uint64]chan<- EnterResult{}, map[uint64]chan<- proto.Message{}
}

func (p *participantActor) setup(m Setup) {
	p.replicas = m.Replicas
	p.core.Setup(len(m.Replicas), m.Max, m.Semaphore)
	if t := m.Tree; len(t.GetHosts()) > 1 {
		p.shape, p.tree = t, make([]*actor.PID, len(t.GetHosts()))
		for i, h := range t.GetHosts() {
			if p.tree[i] = actor.NewPID(h.GetAddress(), h.GetId()); h.GetId() == "" {
				p.shape, p.tree = nil, nil // not a tree to enter by
				break
			}
		}
		p.core.SetTree(len(p.tree))
	}
}

// step steps the core (the generic driver carries out its Box:
// participantDrive) and answers the waiting calls it ended, and counts.
func (p *participantActor) step(ctx actor.Context, ev any) {
	s, _ := participantDrive.Step(ctx, p, p.core, ev)
	for _, a := range s.Enters {
		if ch, ok := p.enters[a.ID]; ok {
			delete(p.enters, a.ID)
			ch <- EnterResult{Kind: a.Kind, Reason: a.Reason, Err: a.Err}
		}
	}
	for _, a := range s.Calls {
		if ch, ok := p.calls[a.ID]; ok {
			delete(p.calls, a.ID)
			ch <- a.Msg
		}
	}
	p.counters.Dup.Add(int64(s.Dup))
	p.counters.Conflict.Add(int64(s.Conflict))
	p.counters.Orphan.Add(int64(s.Orphans))
}

// participantDrive carries out the core's Box: each send goes as a
// request (so that the answers come back here) to the replica of its
// Rank or the barrier host at its Leaf, and the re-ask timer is armed
// unless one is pending.
var participantDrive = &shell.Driver[*participantActor, any, handle.Step]{Carrier: shell.Carrier[*participantActor]{
	Route: func(ctx actor.Context, p *participantActor, snd outbox.Send) bool {
		if r, ok := snd.To.(handle.Rank); ok && int(r) < len(p.replicas) {
			ctx.Request(p.replicas[r], snd.Msg)
		}
		if l, ok := snd.To.(handle.Leaf); ok && int(l) < len(p.tree) {
			if m, ok := snd.Msg.(*messages.BarrierTreeEnter); ok {
				m.Shape = p.shape
			}
			ctx.Request(p.tree[l], snd.Msg)
		}
		return true
	},
	Timer: func(ctx actor.Context, p *participantActor, t outbox.Timer) {
		if p.reasking == nil {
			sys, self, msg := ctx.ActorSystem(), ctx.Self(), t.Msg
			p.reasking = time.AfterFunc(time.Until(t.At), func() { sys.Root.Send(self, msg) })
		}
	},
}}

// build makes a call's message for each replica.
func (p *participantActor) build(m CallRequest) []proto.Message {
	msgs := make([]proto.Message, len(p.replicas))
	for rank := range p.replicas {
		msgs[rank] = m.Build(m.ID, int32(rank))
	}
	return msgs
}

// cancel withdraws a call whose caller gave up.
func (p *participantActor) cancel(m CancelRequest) {
	p.core.Cancel(m.ID, m.Label)
	delete(p.enters, m.ID)
	delete(p.calls, m.ID)
	if m.Done != nil {
		close(m.Done)
	}
}

func (p *participantActor) failure(ctx actor.Context, m *messages.BarrierFailure) {
	if p.onFailure != nil {
		p.safely(ctx, "OnFailure", func() {
			p.onFailure(Failure{Barrier: p.name, Label: m.GetLabel(), Host: m.GetHost(), Reason: m.GetReason()})
		})
	}
}

func (p *participantActor) consult(ctx actor.Context, m *messages.BarrierConsult) bool {
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
func (p *participantActor) safely(ctx actor.Context, what string, f func()) {
	defer func() {
		if r := recover(); r != nil {
			ctx.Logger().Error("barrier callback panicked", "barrier", p.name, "callback", what, "panic", fmt.Sprint(r))
		}
	}()
	f()
}
