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

// Manager is the thin actor around one Replica, run on shell.Driver: it
// turns messages into the replica.Replica's events, the driver carries
// out each step's Box (sends, watches and one timer, the replica's Wake;
// no polling), and the manager acts on the rest of its Effects.
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
	// treeOutcome).
	leaves treeLeaves
	// outs are the outcomes bound down the tree, and pending what else
	// the replica's steps asked for, while one message is taken (done).
	outs    []*messages.BarrierOutcome
	pending replica.Effects
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
	var ev any
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if !m.started(ctx, now) {
			return
		}
		m.done(ctx, now)
		return
	case *actor.Stopping, *actor.Restarting:
		m.wake.Stop()
		m.senders.Close()
		return
	case *messages.BarrierCreate:
		ev = replica.Created{Req: msg, From: ctx.Sender()}
	case *messages.BarrierOpen:
		ev = replica.Created{From: ctx.Sender()}
	case *messages.BarrierEnter:
		ev = replica.Enter{Req: msg, From: ctx.Sender()}
	case *messages.BarrierEnters:
		m.treeEnters(ctx, now, msg)
		m.done(ctx, now)
		return
	case *messages.BarrierUndelivered:
		ev = replica.Undelivered{Target: replica.PeerPID(msg.GetTarget())}
	case *messages.BarrierRelease:
		ev = replica.Release{Req: msg, From: ctx.Sender()}
	case *messages.BarrierClose:
		ev = replica.Close{Req: msg, From: ctx.Sender()}
	case *messages.BarrierStatus:
		ev = replica.Status{Req: msg, From: ctx.Sender()}
	case *messages.BarrierDecide, *messages.BarrierReplicate, *messages.BarrierSyncRequest,
		*messages.BarrierCloseAck, *messages.BarrierHandover, replica.Wake:
		ev = msg
	case *MemberFailed:
		ev = replica.MemberDown{Member: msg.Member, Address: msg.Address}
	case *actor.Terminated:
		ev = replica.ParticipantDown{PID: msg.GetWho()}
	case *actor.DeadLetterResponse:
		ev = replica.Undelivered{Target: msg.GetTarget()}
	case *messages.BarrierCreated:
		return // a backup's answer
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	default:
		m.cfg.Log.WithFields(logrus.Fields{"manager": m.name(ctx), "type": actorutil.TypeName(msg)}).Debug("barrier manager dropped an unknown message")
		return
	}
	m.step(ctx, now, ev)
	m.done(ctx, now)
}

func (m *Manager) started(ctx actor.Context, now time.Time) bool {
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
	m.core = core
	m.took(ctx, e0)
	if m.cfg.Failed != nil {
		for rank, member := range c.GetReplicaMembers() {
			if addr := c.GetReplicas()[rank].GetAddress(); m.cfg.Failed(member, addr) {
				m.step(ctx, now, replica.MemberDown{Member: member, Address: addr})
			}
		}
	}
	if restarted {
		m.cfg.Log.WithField("manager", m.name(ctx)).Warn("barrier manager restarted without state; asking the other replicas")
	} else if c.GetRank() == 0 && !c.GetFromPrimary() {
		m.step(ctx, now, replica.CreateBackups{})
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

// step steps the replica with ev at now (one message's events happen
// at its now); the driver carries out its Box
// (managerDrive) and the rest waits in m.pending for done.
func (m *Manager) step(ctx actor.Context, now time.Time, ev any) {
	e, _ := managerDrive.StepAt(ctx, m, m.core, now, ev)
	m.keep(e)
}

// took carries out Effects the replica returned other than from Step
// (its construction's).
func (m *Manager) took(ctx actor.Context, e replica.Effects) {
	managerDrive.Carry(ctx, m, e.Box, nil)
	m.keep(e)
}

// keep adds what is the replica's own in e to m.pending.
func (m *Manager) keep(e replica.Effects) {
	p := &m.pending
	p.Failures = append(p.Failures, e.Failures...)
	p.Warnings = append(p.Warnings, e.Warnings...)
	p.TookOver = p.TookOver || e.TookOver
	p.SteppedDown = p.SteppedDown || e.SteppedDown
	p.Stop = p.Stop || e.Stop
}

// done acts on what the steps of one message left beside their Boxes:
// the outcomes bound down the tree, failures, warnings, a takeover, the
// barrier's end, and the State it shows.
func (m *Manager) done(ctx actor.Context, now time.Time) {
	self := m.name(ctx)
	e := m.pending
	m.pending = replica.Effects{}
	if len(m.outs) > 0 {
		ctx.Send(ctx.Parent(), &messages.BarrierReleases{Name: m.cfg.Create.GetName(), From: -1, Outcomes: m.outs})
		m.outs = nil
	}
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

// managerDrive steps the replica and carries out its Box (the generic
// driver): an outcome of a label that came up the tree is kept for the
// one BarrierReleases down it (treeOutcome); an Ask goes as a request
// through the manager's senders, so that a DeadLetterResponse names the
// participant or controller that was not running; a plain send to its
// PID; the participants to watch are watched; the replica's Wake
// replaces the one pending (none once the manager stops).
var managerDrive = &shell.Driver[*Manager, any, replica.Effects]{Carrier: shell.Carrier[*Manager]{
	Timer: func(ctx actor.Context, m *Manager, t outbox.Timer) {
		if !m.stop {
			m.wake.Arm(ctx, t.At, t.Msg)
		}
	},
	Route: func(ctx actor.Context, m *Manager, s outbox.Send) bool {
		if o := m.treeOutcome(s.To, s.Msg); o != nil {
			m.outs = append(m.outs, o)
			return true
		}
		a, ok := s.To.(replica.Ask)
		if ok {
			m.senders.Request(ctx, a.PID, s.Msg)
		}
		return ok
	},
}}

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
