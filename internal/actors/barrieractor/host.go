package barrieractor

import (
	"net/url"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/messages"
)

// HostConfig configures a node's barrier host.
type HostConfig struct {
	Log *logrus.Entry
	// MaxBarriers bounds the barrier managers one node hosts (default
	// 4096); a create beyond it answers CAPACITY.
	MaxBarriers int
	// Tombstones is how many closed names a host remembers to answer
	// DELETED (default 4096).
	Tombstones int
	// BeforeReceive runs before each message a manager receives (fault
	// injection: a hook that panics crashes that manager).
	BeforeReceive func(manager string, msg any)
}

// Host is a node's barrier host, a child of the node supervisor: it
// spawns one Manager child per barrier replica on demand and routes every
// barrier message to it by name. A manager that panics is restarted (it
// asks the other replicas for their state).
//
// It also passes on the failures its member declared (MemberFailed) to
// its managers: a replica on a failed member never acknowledges a close,
// and a Close must not wait for it.
type Host struct {
	cfg        HostConfig
	failed     *failedMembers        // shared by the host's incarnations and its managers
	managers   map[string]*actor.PID // barrier name -> manager
	names      map[string]string     // manager id -> barrier name
	closed     map[string]bool
	closedFIFO []string
	trees      treePlaces // this member's positions in barriers' combining trees
}

// NewHostProps returns the props of a barrier host.
func NewHostProps(cfg HostConfig) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.MaxBarriers <= 0 {
		cfg.MaxBarriers = 4096
	}
	if cfg.Tombstones <= 0 {
		cfg.Tombstones = 4096
	}
	restart := actor.NewOneForOneStrategy(3, 10*time.Second, actor.DefaultDecider)
	failed := newFailedMembers(cfg.Tombstones)
	return actorutil.Props(func() actor.Actor { return &Host{cfg: cfg, failed: failed} }, actor.WithSupervisor(restart))
}

// Receive implements actor.Actor.
func (h *Host) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.started()
	case *actor.Stopping, *actor.Restarting:
		h.trees.stopAll()
	case *messages.BarrierTreeEnter:
		h.treeEnter(ctx, m)
	case *messages.BarrierArrivals:
		h.treeArrivals(ctx, m)
	case *messages.BarrierReleases:
		h.treeReleases(ctx, m)
	case treeFlush:
		h.treeFlushed(ctx, m)
	case *messages.BarrierEnters:
		h.enters(ctx, m)
	case *messages.BarrierUndelivered:
		h.route(ctx, m.GetName(), nil, nil)
	case *actor.DeadLetterResponse:
		h.treeUndelivered(ctx, m.GetTarget())
	case *MemberFailed:
		if h.failed.add(*m) {
			// Every manager hears it; one whose replicas are not on that
			// member ignores it.
			for _, pid := range h.managers {
				ctx.Send(pid, m)
			}
		}
	case *messages.BarrierCreate:
		h.create(ctx, m)
	case *messages.BarrierOpen:
		h.open(ctx, m)
	case *messages.BarrierEnter:
		h.enter(ctx, m)
	case *messages.BarrierRelease:
		h.release(ctx, m)
	case *messages.BarrierClose:
		h.close(ctx, m)
	case *messages.BarrierStatus:
		h.status(ctx, m)
	case *messages.BarrierDecide:
		h.route(ctx, m.GetName(), nil, nil)
	case *messages.BarrierReplicate:
		h.route(ctx, m.GetName(), nil, nil)
	case *messages.BarrierSyncRequest:
		h.route(ctx, m.GetName(), nil, nil)
	case *messages.BarrierCloseAck:
		h.route(ctx, m.GetName(), nil, nil)
	case *messages.BarrierHandover:
		h.route(ctx, m.GetName(), nil, nil)
	case managerClosed:
		h.managerClosed(ctx, m.name)
	case *actor.Terminated:
		h.managerGone(m.GetWho())
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		h.cfg.Log.WithFields(logrus.Fields{"host": membername.Actor(ctx.Self()), "type": actorutil.TypeName(m)}).Debug("barrier host dropped an unknown message")
	}
}

func (h *Host) started() {
	h.managers, h.names, h.closed = map[string]*actor.PID{}, map[string]string{}, map[string]bool{}
	h.trees = treePlaces{max: h.cfg.MaxBarriers}
}

// The requests routed to a barrier's manager, each with the refusal its
// asker gets when there is none. The refusal names the rank the request
// was addressed to: a handle sends each request to every replica, and
// the host of each answers for its own (see route).

func (h *Host) open(ctx actor.Context, m *messages.BarrierOpen) {
	h.route(ctx, m.GetName(), &messages.BarrierCreated{Name: m.GetName()}, func(r proto.Message, e *messages.Error) {
		r.(*messages.BarrierCreated).Error = e
	})
}

func (h *Host) enter(ctx actor.Context, m *messages.BarrierEnter) {
	h.route(ctx, m.GetName(), &messages.BarrierRefused{Name: m.GetName(), Label: m.GetLabel(), RequestId: m.GetRequestId(), FromRank: m.GetToRank()}, func(r proto.Message, e *messages.Error) {
		r.(*messages.BarrierRefused).Error = e
	})
}

func (h *Host) release(ctx actor.Context, m *messages.BarrierRelease) {
	h.route(ctx, m.GetName(), &messages.BarrierReleased{Name: m.GetName(), Label: m.GetLabel(), RequestId: m.GetRequestId(), FromRank: m.GetToRank()}, func(r proto.Message, e *messages.Error) {
		r.(*messages.BarrierReleased).Error = e
	})
}

func (h *Host) close(ctx actor.Context, m *messages.BarrierClose) {
	h.route(ctx, m.GetName(), &messages.BarrierClosed{Name: m.GetName(), RequestId: m.GetRequestId(), FromRank: m.GetToRank()}, func(r proto.Message, e *messages.Error) {
		r.(*messages.BarrierClosed).Error = e
	})
}

func (h *Host) status(ctx actor.Context, m *messages.BarrierStatus) {
	h.route(ctx, m.GetName(), &messages.BarrierStatusReply{Name: m.GetName(), RequestId: m.GetRequestId(), FromRank: m.GetToRank()}, func(r proto.Message, e *messages.Error) {
		r.(*messages.BarrierStatusReply).Error = e
	})
}

// managerClosed remembers a closed barrier and stops its manager.
func (h *Host) managerClosed(ctx actor.Context, name string) {
	h.tombstone(name)
	if pid := h.managers[name]; pid != nil {
		delete(h.managers, name)
		delete(h.names, pid.GetId())
		ctx.Poison(pid)
	}
}

// managerGone forgets a manager that stopped.
func (h *Host) managerGone(who *actor.PID) {
	if name, ok := h.names[who.GetId()]; ok {
		delete(h.names, who.GetId())
		if h.managers[name].Equal(who) {
			delete(h.managers, name)
		}
	}
}

// route forwards a message to its barrier's manager. Without one, a
// closed name answers DELETED and an unknown name NOT_FOUND; reply is
// the answer to fill with set. Every replica's host answers for the rank
// it was asked as, not only the first's: the handle settles on NOT_FOUND
// only once every replica's host said so (one without a manager may be
// about to get one, or have lost its replica while others hold the
// barrier), so with the first alone answering, an Enter, Close, Status or
// Release of a barrier no replica holds waited for its deadline, and a
// call took the first's NOT_FOUND for the answer although a backup that
// took over held the barrier.
func (h *Host) route(ctx actor.Context, name string, reply proto.Message, set func(proto.Message, *messages.Error)) {
	if pid := h.managers[name]; pid != nil {
		ctx.Forward(pid)
		return
	}
	if reply == nil || ctx.Sender() == nil {
		return
	}
	var err *messages.Error
	switch {
	case h.closed[name]:
		err = messages.Errorf(messages.ErrorCode_DELETED, "barrier %q is closed", name)
	default:
		if err = replica.CheckName(name); err == nil {
			err = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q", name)
		}
	}
	set(reply, err)
	ctx.Respond(reply)
}

func (h *Host) create(ctx actor.Context, m *messages.BarrierCreate) {
	fail := func(code messages.ErrorCode, format string, args ...any) {
		if !m.GetFromPrimary() && ctx.Sender() != nil {
			ctx.Respond(&messages.BarrierCreated{Name: m.GetName(), Error: messages.Errorf(code, format, args...)})
		}
	}
	name := m.GetName()
	if err := replica.CheckName(name); err != nil {
		fail(err.GetCode(), "%s", err.GetMessage())
		return
	}
	if h.closed[name] {
		fail(messages.ErrorCode_DELETED, "barrier %q is closed", name)
		return
	}
	if pid := h.managers[name]; pid != nil {
		ctx.Forward(pid)
		return
	}
	if _, err := replica.PolicyOptions(m.GetOptions()); err != nil {
		fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: %v", name, err)
		return
	}
	c := proto.Clone(m).(*messages.BarrierCreate)
	if !c.GetFromPrimary() {
		c.Rank = 0
	}
	for _, p := range c.GetReplicas() {
		if p.GetId() == "" {
			fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: unnamed replica", name)
			return
		}
	}
	rank, n := int(c.GetRank()), len(c.GetReplicas())
	switch {
	case n < 1 || n > replica.MaxReplicas:
		fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: %d replicas (1..%d)", name, n, replica.MaxReplicas)
		return
	case rank < 0 || rank >= n || (c.GetFromPrimary() && rank == 0):
		fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: bad rank %d", name, rank)
		return
	case len(c.GetReplicaMembers()) != 0 && len(c.GetReplicaMembers()) != n:
		fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: %d replica members for %d replicas", name, len(c.GetReplicaMembers()), n)
		return
	case !replica.PeerPID(c.GetReplicas()[rank]).Equal(ctx.Self()):
		fail(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: replica %d is %s, not this host %s", name, rank, replica.PeerPID(c.GetReplicas()[rank]), ctx.Self())
		return
	case len(h.managers) >= h.cfg.MaxBarriers:
		fail(messages.ErrorCode_CAPACITY, "node hosts %d barriers already", len(h.managers))
		return
	}
	pid, err := ctx.SpawnNamed(newManagerProps(ManagerConfig{Create: c, Log: h.cfg.Log, BeforeReceive: h.cfg.BeforeReceive, Failed: h.failed.has}), ChildName(name))
	if err != nil {
		fail(messages.ErrorCode_UNAVAILABLE, "barrier %q: cannot start its manager: %v", name, err)
		return
	}
	h.managers[name] = pid
	h.names[pid.GetId()] = name
	ctx.Forward(pid)
}

func (h *Host) tombstone(name string) {
	if h.closed[name] {
		return
	}
	if len(h.closedFIFO) >= h.cfg.Tombstones {
		delete(h.closed, h.closedFIFO[0])
		h.closedFIFO = h.closedFIFO[1:]
	}
	h.closed[name] = true
	h.closedFIFO = append(h.closedFIFO, name)
}

// ChildName is the actor name of a barrier's manager under its host.
func ChildName(name string) string { return "b-" + url.PathEscape(name) }
