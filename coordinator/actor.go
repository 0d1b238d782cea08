package coordinator

import (
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/netmodel"
)

// ActorConfig is what the coordinators of one node share.
type ActorConfig struct {
	Reduce Config
	// ShardFor returns the directory shard of an object id (to subscribe
	// to the sources' locations).
	ShardFor func(id string) *actor.PID
	// Estimator supplies L and B for the cost model.
	Estimator *netmodel.Estimator
	Log       *logrus.Entry
	// Resubscribe is how often a coordinator that still waits for sources
	// subscribes to them again (default 500 ms). Subscriptions are soft
	// state in the directory: a shard that restarts, or moves to another
	// member, forgets them. (Not on the EventStream's ShardRebuilt: in this
	// Proto.Actor version Subscribe races with Publish.)
	Resubscribe time.Duration
	// BeforeReceive, if set, runs before each message a coordinator
	// receives, with the Reduce's id (target#nonce), for fault injection
	// and tests. A hook that panics crashes the coordinator: its shard
	// stops it (not restarts: see actors/directory's supervisor strategy)
	// and the Reduce fails with UNAVAILABLE.
	BeforeReceive func(reduce string, msg any)
}

// Coordinator is the actor that runs one Reduce: a child of the directory
// shard that owns the target, which reserved the target id for it. It is
// a thin shell around a Reduction.
type Coordinator struct {
	cfg       ActorConfig
	id        string
	start     *messages.StartReduce
	requester *actor.PID
	r         *Reduction
	timer     *time.Timer
	begin     time.Time
	watched   map[string]string // store node PID -> node id
	done      chan struct{}
	// Under a knee policy, until the gate fixes the count: r is a
	// placeholder that only answers failures, and arrivals wait here.
	gate      *KneeGate
	pending   []*messages.LocationUpdate
	deleted   map[string]bool
	kneeTimer *time.Timer
}

type expire struct{}

type resubscribe struct{}

type kneeCheck struct{}

// NewProps returns the props of the coordinator of one Reduce. requester
// receives the ReduceReply.
func NewProps(cfg ActorConfig, reduceID string, start *messages.StartReduce, requester *actor.PID) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.Estimator == nil {
		cfg.Estimator = netmodel.NewEstimator(100*time.Microsecond, 1.25e9)
	}
	if cfg.Reduce.Estimator == nil {
		// The plan reports how many samples its L and B rest on.
		cfg.Reduce.Estimator = cfg.Estimator
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Coordinator{cfg: cfg, id: reduceID, start: start, requester: requester}
	})
}

// Receive implements actor.Actor.
func (c *Coordinator) Receive(ctx actor.Context) {
	if h := c.cfg.BeforeReceive; h != nil {
		h(c.id, ctx.Message())
	}
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.begin = time.Now()
		req := c.start.GetReduce()
		L, B, _, _ := c.cfg.Estimator.Estimate()
		timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
		c.r = NewReductionFor(c.id, req, c.start.GetCaller(), c.cfg.Reduce, c.begin, timeout, L, B)
		c.watched = map[string]string{}
		if req.GetKnee() != nil {
			gate, err := NewKneeGate(req)
			if err != nil { // validated by the store node: a bug
				c.apply(ctx, c.r.Abort(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: knee: %v", err)))
				return
			}
			c.gate, c.deleted = gate, map[string]bool{}
		}
		self, system := ctx.Self(), ctx.ActorSystem()
		c.timer = time.AfterFunc(timeout, func() { system.Root.Send(self, expire{}) })
		c.apply(ctx, c.r.Begin())
		c.subscribe(ctx)
		c.startRefresh(ctx)
	case resubscribe:
		c.subscribe(ctx)
	case kneeCheck:
		if c.gating() {
			c.gateStep(ctx, c.gate.Check(time.Now()))
		}
	case *actor.Terminated:
		if node, ok := c.watched[m.GetWho().String()]; ok {
			delete(c.watched, m.GetWho().String())
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "node": node}).Info("reduce participant failed; repairing the tree")
			if c.gating() {
				// An arrival whose copy died no longer counts as available.
				c.pending = slices.DeleteFunc(c.pending, func(u *messages.LocationUpdate) bool { return u.GetNode().GetNodeId() == node })
			}
			c.apply(ctx, c.r.NodeFailed(node))
		}
	case *messages.LocationUpdate:
		if c.gating() {
			c.arrive(ctx, m)
			return
		}
		c.apply(ctx, c.r.Located(m))
	case *messages.ReduceTaskStarted:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": m.GetPosition(), "generation": m.GetGeneration(),
			"error": m.GetError().GetMessage()}).Debug("tree position started")
		c.apply(ctx, c.r.Started(m))
	case *messages.ReduceTaskDone:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": m.GetPosition(), "generation": m.GetGeneration(),
			"error": m.GetError().GetMessage()}).Debug("tree position done")
		c.apply(ctx, c.r.Done(m))
	case *messages.StoreReducedReply:
		c.apply(ctx, c.r.Stored(m))
	case expire:
		if c.gating() {
			c.apply(ctx, c.r.Abort(messages.Errorf(messages.ErrorCode_TIMEOUT,
				"reduce: knee policy: %d of %d sources arrived before the deadline and no knee was accepted (%d needed by min_percent)",
				c.gate.Arrived(), len(c.start.GetReduce().GetSourceIds()), c.gate.Needed())))
			return
		}
		c.apply(ctx, c.r.Expire(time.Now()))
	case *actor.Stopping:
		if c.timer != nil {
			c.timer.Stop()
		}
		c.stopRefresh()
		if c.kneeTimer != nil {
			c.kneeTimer.Stop()
		}
		if c.r != nil && !c.r.Over() {
			c.apply(ctx, c.r.Abort(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce coordinator stopped")))
		} else if c.r == nil {
			// It crashed before its Reduction existed: the caller still
			// gets an answer, and the reserved target is freed.
			target := c.start.GetReduce().GetTargetId()
			if c.requester != nil {
				ctx.Send(c.requester, &messages.ReduceReply{TargetId: target,
					Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce coordinator stopped before it started")})
			}
			if ctx.Parent() != nil {
				ctx.Send(ctx.Parent(), &messages.ReleaseTarget{TargetId: target, ReduceId: c.id})
			}
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "target": target}).Warn("reduce failed: its coordinator stopped before it started")
		}
	}
}

// gating reports whether a knee policy has not fixed the count yet.
func (c *Coordinator) gating() bool { return c.gate != nil && c.gate.Num() == 0 && !c.r.Over() }

// arrive feeds a source's location to the knee gate and keeps it for the
// Reduction that starts once the count is fixed.
func (c *Coordinator) arrive(ctx actor.Context, u *messages.LocationUpdate) {
	id := u.GetObjectId()
	if !slices.Contains(c.start.GetReduce().GetSourceIds(), id) {
		return
	}
	if u.GetDeleted() {
		c.deleted[id] = true
		c.pending = slices.DeleteFunc(c.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id })
		if left := len(c.start.GetReduce().GetSourceIds()) - len(c.deleted); left < c.gate.Needed() {
			c.apply(ctx, c.r.Abort(messages.Errorf(messages.ErrorCode_DELETED,
				"reduce: source %q was deleted; %d sources remain, min_percent needs %d", id, left, c.gate.Needed())))
		}
		return
	}
	if u.GetNode() == nil || u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED ||
		slices.ContainsFunc(c.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id }) {
		return
	}
	if pid := u.GetNode().PID(); c.watched[pid.String()] == "" {
		// Its node may die before the count is fixed.
		c.watched[pid.String()] = u.GetNode().GetNodeId()
		ctx.Watch(pid)
	}
	c.pending = append(c.pending, u)
	c.gateStep(ctx, c.gate.Arrive(id, time.Now()))
}

// gateStep starts the Reduction once the gate fixed the count, or arms
// the timer for the gate's next deadline.
func (c *Coordinator) gateStep(ctx actor.Context, num int) {
	if num == 0 {
		if c.kneeTimer != nil {
			c.kneeTimer.Stop()
		}
		if at := c.gate.NextDeadline(); !at.IsZero() {
			self, system := ctx.Self(), ctx.ActorSystem()
			c.kneeTimer = time.AfterFunc(time.Until(at), func() { system.Root.Send(self, kneeCheck{}) })
		}
		return
	}
	req := proto.Clone(c.start.GetReduce()).(*messages.Reduce)
	req.NumObjects = int32(num)
	c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "arrived": c.gate.Arrived(), "reduce_count": num,
		"completed_by": c.gate.Reason(), "after": time.Since(c.begin).Round(time.Microsecond)}).Info("knee policy fixed the number of sources to reduce")
	L, B, _, _ := c.cfg.Estimator.Estimate()
	// The same deadline as the placeholder's: both count from the start.
	c.r = NewReductionFor(c.id, req, c.start.GetCaller(), c.cfg.Reduce, c.begin, time.Duration(req.GetTimeoutMs())*time.Millisecond, L, B)
	c.apply(ctx, c.r.Begin())
	for _, u := range c.pending {
		c.apply(ctx, c.r.Located(u))
	}
	for id := range c.deleted {
		c.apply(ctx, c.r.Located(&messages.LocationUpdate{ObjectId: id, Deleted: true}))
	}
	c.pending, c.deleted = nil, nil
}

// subscribe asks the sources' shards for the locations the Reduction
// still waits for. A shard keeps one subscription per subscriber and
// object, and the Reduction ignores locations it already has, so doing it
// again is harmless.
func (c *Coordinator) subscribe(ctx actor.Context) {
	for _, id := range c.r.Waiting() {
		ctx.Request(c.cfg.ShardFor(id), &messages.Subscribe{ObjectId: id})
	}
}

// startRefresh renews the subscriptions periodically.
func (c *Coordinator) startRefresh(ctx actor.Context) {
	every := c.cfg.Resubscribe
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	self, system := ctx.Self(), ctx.ActorSystem()
	// A goroutine rather than the actor scheduler: its timers race
	// (see actors/directory). It ends with the coordinator.
	c.done = make(chan struct{})
	go actorutil.Tick(system, self, every, resubscribe{}, c.done)
}

func (c *Coordinator) stopRefresh() {
	if c.done != nil {
		close(c.done)
		c.done = nil
	}
}

func (c *Coordinator) apply(ctx actor.Context, fx Effects) {
	remaining := max(1, time.Until(c.r.Deadline()).Milliseconds())
	for _, n := range fx.Watch {
		pid := n.PID()
		c.watched[pid.String()] = n.GetNodeId()
		ctx.Watch(pid)
	}
	for _, e := range fx.Events {
		ctx.ActorSystem().EventStream.Publish(e)
	}
	debug := c.cfg.Log.Logger.IsLevelEnabled(logrus.DebugLevel)
	for _, t := range fx.Invalidate {
		if debug {
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": t.Task.GetPosition(), "generation": t.Task.GetGeneration(),
				"node": t.Node.GetNodeId()}).Debug("invalidating a tree position")
		}
		ctx.Send(t.Node.PID(), &messages.ReduceInvalidate{ReduceId: c.id, Position: t.Task.GetPosition(), Generation: t.Task.GetGeneration()})
	}
	for _, t := range fx.Tasks {
		if debug {
			var kids []string
			for _, k := range t.Task.GetChildren() {
				kids = append(kids, k.GetNode().GetNodeId())
			}
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": t.Task.GetPosition(), "generation": t.Task.GetGeneration(),
				"node": t.Node.GetNodeId(), "source": t.Task.GetSourceId(), "children": kids, "root": t.Task.GetRoot()}).Debug("sending a tree position its task")
		}
		t.Task.TimeoutMs = remaining
		ctx.Request(t.Node.PID(), t.Task)
	}
	if fx.StoreInline != nil {
		fx.StoreInline.TimeoutMs = remaining
		ctx.Request(c.start.GetCaller().PID(), fx.StoreInline)
	}
	for _, n := range fx.Fetch {
		// A future per participant: a store node answers a Get without a
		// sender, and the Reduction must know which participant is done.
		node := n.GetNodeId()
		get := &messages.Get{ObjectId: c.start.GetReduce().GetTargetId(), Prefetch: true, TimeoutMs: remaining}
		// The Get answers TIMEOUT by itself at the deadline; the future
		// only guards against an answer that never comes.
		f := ctx.RequestFuture(n.PID(), get, time.Duration(remaining)*time.Millisecond+time.Second)
		ctx.ReenterAfter(f, func(res any, err error) {
			switch {
			case errors.Is(err, actor.ErrDeadLetter):
				// Its node is gone: the watch reports it, and a failed
				// participant is not waited for.
			case err != nil:
				c.apply(ctx, c.r.Fetched(node, messages.Errorf(messages.ErrorCode_TIMEOUT, "no answer to the Get of the result: %v", err)))
			default:
				gr, ok := res.(*messages.GetReply)
				if !ok {
					c.apply(ctx, c.r.Fetched(node, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected answer %T to a Get", res)))
					return
				}
				c.apply(ctx, c.r.Fetched(node, messages.ErrOrNil(gr.GetError())))
			}
		})
	}
	for _, n := range fx.Release {
		ctx.Send(n.PID(), &messages.ReduceRelease{ReduceId: c.id, KeepTarget: fx.ReleaseKeep})
	}
	if fx.ReleaseTarget && ctx.Parent() != nil {
		ctx.Send(ctx.Parent(), &messages.ReleaseTarget{TargetId: c.start.GetReduce().GetTargetId(), ReduceId: c.id})
	}
	if fx.Reply == nil {
		return
	}
	for _, id := range c.start.GetReduce().GetSourceIds() {
		ctx.Request(c.cfg.ShardFor(id), &messages.Unsubscribe{ObjectId: id})
	}
	if c.gate != nil && c.gate.Num() > 0 {
		fx.Reply.CompletedBy = c.gate.Reason()
	}
	if c.requester != nil {
		ctx.Send(c.requester, fx.Reply)
	}
	ctx.ActorSystem().EventStream.Publish(&events.ReduceDone{Reduce: c.id, Target: fx.Reply.GetTargetId(),
		Reduced: fx.Reply.GetReducedIds(), Elapsed: time.Since(c.begin), Err: messages.ErrOrNil(fx.Reply.GetError())})
	entry := c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "target": fx.Reply.GetTargetId(),
		"reduced": len(fx.Reply.GetReducedIds()), "elapsed": time.Since(c.begin).Round(time.Microsecond)})
	if err := messages.ErrOrNil(fx.Reply.GetError()); err != nil {
		level := logrus.WarnLevel
		if errors.Is(err, messages.ErrInvalidArgument) {
			level = logrus.InfoLevel
		}
		entry.WithField("error", err).Log(level, "reduce failed")
	} else {
		entry.WithFields(logrus.Fields{"degree": fx.Reply.GetPlan().GetDegree(), "shape": fx.Reply.GetPlan().GetShape()}).Info("reduce done")
	}
	ctx.Stop(ctx.Self())
}
