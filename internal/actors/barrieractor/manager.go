package barrieractor

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// ManagerConfig configures one barrier manager replica.
type ManagerConfig struct {
	// Create is the message that created this replica (validated by the
	// host; for a client's create the host sets Rank 0).
	Create *messages.BarrierCreate
	Log    *logrus.Entry
	// BeforeReceive: see HostConfig.
	BeforeReceive func(manager string, msg any)
	// Failed reports whether the cluster declared a member incarnation
	// failed before this manager (re)started; later failures come as
	// MemberFailed.
	Failed func(member, address string) bool
}

// managerClosed tells the host that a barrier closed.
type managerClosed struct{ name string }

// Manager is the thin actor around one Replica: it turns messages into
// the replica.Replica's events and its Effects into sends, watches,
// events and one timer (the replica's Wake; no polling).
type Manager struct {
	cfg    ManagerConfig
	starts *atomic.Int32 // shared by the manager's incarnations
	core   *replica.Replica
	wake   shell.Timer
	stop   bool
	// senders send the asks, one per participant or controller, so that
	// a DeadLetterResponse names the one that was gone. Kept until the
	// manager stops: a dead letter may come after the Terminated.
	senders actorutil.Senders
	// shown is the last State published (nil: none).
	shown *State
	// leaves: where each label that came up the tree entered it (see
	// treeOutcomes).
	leaves treeLeaves
}

func newManagerProps(cfg ManagerConfig) *actor.Props {
	starts := new(atomic.Int32)
	return actorutil.Props(func() actor.Actor { return &Manager{cfg: cfg, starts: starts} })
}

// Receive implements actor.Actor.
func (m *Manager) Receive(ctx actor.Context) {
	if h := m.cfg.BeforeReceive; h != nil {
		h(ctx.Self().GetId(), ctx.Message())
	}
	now := time.Now()
	var e replica.Effects
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if !m.started(ctx, now, &e) {
			return
		}
	case *actor.Stopping, *actor.Restarting:
		m.wake.Stop()
		m.senders.Close()
		return
	case *messages.BarrierCreate:
		e = m.core.Step(now, replica.Created{Req: msg, From: ctx.Sender()})
	case *messages.BarrierOpen:
		e = m.core.Step(now, replica.Created{From: ctx.Sender()})
	case *messages.BarrierEnter:
		e = m.core.Step(now, replica.Enter{Req: msg, From: ctx.Sender()})
	case *messages.BarrierEnters:
		e = m.treeEnters(now, msg)
	case *messages.BarrierUndelivered:
		e = m.core.Step(now, replica.Undelivered{Target: replica.PeerPID(msg.GetTarget())})
	case *messages.BarrierRelease:
		e = m.core.Step(now, replica.Release{Req: msg, From: ctx.Sender()})
	case *messages.BarrierClose:
		e = m.core.Step(now, replica.Close{Req: msg, From: ctx.Sender()})
	case *messages.BarrierStatus:
		e = m.core.Step(now, replica.Status{Req: msg, From: ctx.Sender()})
	case *messages.BarrierDecide:
		e = m.core.Step(now, msg)
	case *messages.BarrierReplicate:
		e = m.core.Step(now, msg)
	case *messages.BarrierSyncRequest:
		e = m.core.Step(now, msg)
	case *messages.BarrierCloseAck:
		e = m.core.Step(now, msg)
	case *messages.BarrierHandover:
		e = m.core.Step(now, msg)
	case *MemberFailed:
		e = m.core.Step(now, replica.MemberDown{Member: msg.Member, Address: msg.Address})
	case *actor.Terminated:
		e = m.core.Step(now, replica.ParticipantDown{PID: msg.GetWho()})
	case replica.Wake:
		e = m.core.Step(now, msg)
	case *actor.DeadLetterResponse:
		e = m.core.Step(now, replica.Undelivered{Target: msg.GetTarget()})
	case *messages.BarrierCreated:
		return // a backup's answer
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	default:
		m.cfg.Log.WithFields(logrus.Fields{"manager": m.name(ctx), "type": actorutil.TypeName(msg)}).Debug("barrier manager dropped an unknown message")
		return
	}
	m.do(ctx, now, e)
}

func (m *Manager) started(ctx actor.Context, now time.Time, e *replica.Effects) bool {
	c := m.cfg.Create
	restarted := m.starts.Add(1) > 1
	replicas := make([]*actor.PID, len(c.GetReplicas()))
	for i, p := range c.GetReplicas() {
		replicas[i] = replica.PeerPID(p)
	}
	core, e0, err := replica.New(replica.Config{
		Name: c.GetName(), Options: c.GetOptions(), Replicas: replicas, Members: c.GetReplicaMembers(),
		Rank: int(c.GetRank()), Controller: replica.PeerPID(c.GetController()), Restarted: restarted, Tree: c.GetTree(),
	}, now)
	if err != nil {
		m.cfg.Log.WithError(err).WithField("manager", m.name(ctx)).Error("barrier manager cannot start")
		ctx.Stop(ctx.Self())
		return false
	}
	m.core, *e = core, e0
	if m.cfg.Failed != nil {
		for rank, member := range c.GetReplicaMembers() {
			if addr := c.GetReplicas()[rank].GetAddress(); m.cfg.Failed(member, addr) {
				*e = merge(*e, core.Step(now, replica.MemberDown{Member: member, Address: addr}))
			}
		}
	}
	if restarted {
		m.cfg.Log.WithField("manager", m.name(ctx)).Warn("barrier manager restarted without state; asking the other replicas")
	} else if c.GetRank() == 0 && !c.GetFromPrimary() {
		*e = merge(*e, core.Step(now, replica.CreateBackups{}))
	}
	return true
}

// name is this manager as events and logs write it: "<member id>/<its
// actor>" (package membername), the member being its replica's.
func (m *Manager) name(ctx actor.Context) string {
	var member string
	if ids := m.cfg.Create.GetReplicaMembers(); int(m.cfg.Create.GetRank()) < len(ids) {
		member = ids[m.cfg.Create.GetRank()]
	}
	return membername.Of(member, ctx.Self().GetId())
}

func (m *Manager) do(ctx actor.Context, now time.Time, e replica.Effects) {
	self := m.name(ctx)
	m.treeOutcomes(ctx, &e)
	managerOut.Carry(ctx, m, e.Box, nil)
	name := m.cfg.Create.GetName()
	for _, f := range e.Failures {
		m.cfg.Log.WithFields(logrus.Fields{"barrier": name, "label": f.Label, "host": f.Host, "reason": f.Reason}).Warn("barrier participant failed")
		ctx.ActorSystem().EventStream.Publish(&DeliveryFailed{Barrier: name, Label: f.Label, Host: f.Host, Reason: f.Reason, Manager: self, At: now})
	}
	for _, w := range e.Warnings {
		m.cfg.Log.WithField("manager", self).Warn(w)
	}
	if e.TookOver {
		var member string
		if ids := m.cfg.Create.GetReplicaMembers(); int(m.cfg.Create.GetRank()) < len(ids) {
			member = ids[m.cfg.Create.GetRank()]
		}
		m.cfg.Log.WithFields(logrus.Fields{"barrier": name, "manager": self, "epoch": m.core.Epoch()}).Warn("barrier backup took over as primary")
		ctx.ActorSystem().EventStream.Publish(&TookOver{Barrier: name, Manager: self, Member: member, Epoch: m.core.Epoch(), At: now})
	}
	if e.SteppedDown {
		m.cfg.Log.WithFields(logrus.Fields{"barrier": name, "manager": self, "epoch": m.core.Epoch()}).Warn("barrier manager heard a newer primary and stepped down")
	}
	if e.Stop && !m.stop {
		// The host poisons us: what is already in the mailbox is still
		// answered (DELETED) before we stop.
		m.stop = true
		m.wake.Stop()
		ctx.Send(ctx.Parent(), managerClosed{name: name})
	}
	m.publishState(ctx, now)
}

// managerOut carries out a replica's Effects (the generic shell): an Ask
// goes as a request through the manager's senders, so that a
// DeadLetterResponse names the participant or controller that was not
// running; a plain send to its PID; the participants to watch are
// watched; the replica's Wake replaces the one pending (none once the
// manager stops).
var managerOut = &shell.Carrier[*Manager]{
	Timer: func(ctx actor.Context, m *Manager, t outbox.Timer) {
		if !m.stop {
			m.wake.Arm(ctx, t.At, t.Msg)
		}
	},
	Route: func(ctx actor.Context, m *Manager, s outbox.Send) bool {
		a, ok := s.To.(replica.Ask)
		if ok {
			m.senders.Request(ctx, a.PID, s.Msg)
		}
		return ok
	},
}

// publishState publishes the barrier's State when it changed: the
// acting primary's, and a last one from a replica that stops acting.
func (m *Manager) publishState(ctx actor.Context, now time.Time) {
	acting := m.core.Acting() && !m.core.Closed()
	if !acting && (m.shown == nil || !m.shown.Acting) {
		return
	}
	b := m.core.Barrier()
	entered, passed, queued, holders := b.Counts()
	fired, reason := b.Fired()
	o := m.cfg.Create.GetOptions()
	s := &State{Barrier: m.cfg.Create.GetName(), Manager: m.name(ctx), Acting: acting, Epoch: m.core.Epoch(), Kind: "barrier",
		Max: int(o.GetMaxParticipants()), Entered: entered, Passed: passed, Queued: queued, Fired: fired, Limit: b.Limit(),
		Holders: holders, Closed: m.core.Closed() || m.stop}
	switch {
	case o.GetSemaphore() != nil:
		s.Kind = "semaphore"
	case o.GetThrottle() != nil:
		s.Kind = "throttled"
		if fired {
			s.Queued, s.Throttled = 0, queued
		}
	}
	if fired {
		s.Reason = reason.String()
	}
	members, primary := m.cfg.Create.GetReplicaMembers(), m.core.Primary()
	if rank := int(m.cfg.Create.GetRank()); rank < len(members) {
		s.Member = members[rank]
	}
	s.Replicas = make([]ReplicaState, len(members))
	for rank, id := range members {
		s.Replicas[rank] = ReplicaState{Member: id, Primary: rank == primary, Down: m.core.Down(rank)}
	}
	if m.shown != nil && sameState(m.shown, s) {
		return
	}
	s.At = now
	m.shown = s
	ctx.ActorSystem().EventStream.Publish(s)
}

// sameState reports whether o shows what s shows (At aside).
func sameState(s, o *State) bool {
	return s.Barrier == o.Barrier && s.Manager == o.Manager && s.Member == o.Member && s.Acting == o.Acting && s.Epoch == o.Epoch &&
		s.Kind == o.Kind && s.Max == o.Max && s.Entered == o.Entered && s.Passed == o.Passed && s.Queued == o.Queued &&
		s.Throttled == o.Throttled && s.Fired == o.Fired && s.Reason == o.Reason && s.Limit == o.Limit && s.Holders == o.Holders &&
		s.Closed == o.Closed && slices.Equal(s.Replicas, o.Replicas)
}

// merge appends b's effects to a's (a core event's effects, in order).
func merge(a, b replica.Effects) replica.Effects {
	a.Merge(b.Box)
	a.Failures = append(a.Failures, b.Failures...)
	a.Warnings = append(a.Warnings, b.Warnings...)
	a.TookOver = a.TookOver || b.TookOver
	a.SteppedDown = a.SteppedDown || b.SteppedDown
	a.Stop = a.Stop || b.Stop
	return a
}
