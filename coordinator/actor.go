package coordinator

import (
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/coordinator/plan"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// ActorConfig is what the coordinators of one node share.
type ActorConfig struct {
	Reduce Config
	// ShardFor returns the directory shard of an object id (to subscribe
	// to the sources' locations).
	ShardFor func(id string) *actor.PID
	// Estimator supplies L and B for the cost model.
	Estimator *plan.Estimator
	Log       *logrus.Entry
	// Resubscribe is how often a coordinator that still waits for sources
	// subscribes to them again (default 500 ms). Subscriptions are soft
	// state in the directory: a shard that restarts, or moves to another
	// member, forgets them. A local ShardRebuilt event triggers it at once;
	// the period covers shards rebuilt in other processes.
	Resubscribe time.Duration
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
	refresh   *time.Ticker
	done      chan struct{}
	rebuilt   *eventstream.Subscription
}

type expire struct{}

type resubscribe struct{}

// NewProps returns the props of the coordinator of one Reduce. requester
// receives the ReduceReply.
func NewProps(cfg ActorConfig, reduceID string, start *messages.StartReduce, requester *actor.PID) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.Estimator == nil {
		cfg.Estimator = plan.NewEstimator(100*time.Microsecond, 1.25e9)
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Coordinator{cfg: cfg, id: reduceID, start: start, requester: requester}
	})
}

// Receive implements actor.Actor.
func (c *Coordinator) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.begin = time.Now()
		req := c.start.GetReduce()
		L, B, _, _ := c.cfg.Estimator.Estimate()
		timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
		c.r = NewReductionFor(c.id, req, c.start.GetCaller(), c.cfg.Reduce, c.begin, timeout, L, B)
		c.watched = map[string]string{}
		self, system := ctx.Self(), ctx.ActorSystem()
		c.timer = time.AfterFunc(timeout, func() { system.Root.Send(self, expire{}) })
		c.apply(ctx, c.r.Begin())
		c.subscribe(ctx)
		c.startRefresh(ctx)
	case resubscribe:
		c.subscribe(ctx)
	case *actor.Terminated:
		if node, ok := c.watched[m.GetWho().String()]; ok {
			delete(c.watched, m.GetWho().String())
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "node": node}).Info("reduce participant failed; repairing the tree")
			c.apply(ctx, c.r.NodeFailed(node))
		}
	case *messages.LocationUpdate:
		c.apply(ctx, c.r.Located(m))
	case *messages.ReduceTaskStarted:
		c.apply(ctx, c.r.Started(m))
	case *messages.ReduceTaskDone:
		c.apply(ctx, c.r.Done(m))
	case *messages.StoreReducedReply:
		c.apply(ctx, c.r.Stored(m))
	case *messages.GetReply:
		c.apply(ctx, c.r.Fetched(ctx.Sender().GetId(), messages.ErrOrNil(m.GetError())))
	case expire:
		c.apply(ctx, c.r.Expire(time.Now()))
	case *actor.Stopping:
		if c.timer != nil {
			c.timer.Stop()
		}
		c.stopRefresh(ctx)
		if c.r != nil && !c.r.Over() {
			c.apply(ctx, c.r.Abort(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce coordinator stopped")))
		}
	}
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

// startRefresh renews the subscriptions: at once when a shard of this
// process restarts, and periodically for shards elsewhere.
func (c *Coordinator) startRefresh(ctx actor.Context) {
	every := c.cfg.Resubscribe
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	self, system := ctx.Self(), ctx.ActorSystem()
	c.rebuilt = system.EventStream.SubscribeWithPredicate(func(any) { system.Root.Send(self, resubscribe{}) },
		func(e any) bool { _, ok := e.(*events.ShardRebuilt); return ok })
	// A goroutine rather than the actor scheduler: its timers race
	// (see actors/directory). It ends with the coordinator.
	c.refresh, c.done = time.NewTicker(every), make(chan struct{})
	go func(t *time.Ticker, done <-chan struct{}) {
		for {
			select {
			case <-t.C:
				system.Root.Send(self, resubscribe{})
			case <-done:
				return
			}
		}
	}(c.refresh, c.done)
}

func (c *Coordinator) stopRefresh(ctx actor.Context) {
	if c.rebuilt != nil {
		ctx.ActorSystem().EventStream.Unsubscribe(c.rebuilt)
		c.rebuilt = nil
	}
	if c.refresh != nil {
		c.refresh.Stop()
		close(c.done)
		c.refresh = nil
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
	for _, t := range fx.Invalidate {
		ctx.Send(t.Node.PID(), &messages.ReduceInvalidate{ReduceId: c.id, Position: t.Task.GetPosition(), Generation: t.Task.GetGeneration()})
	}
	for _, t := range fx.Tasks {
		t.Task.TimeoutMs = remaining
		ctx.Request(t.Node.PID(), t.Task)
	}
	if fx.StoreInline != nil {
		fx.StoreInline.TimeoutMs = remaining
		ctx.Request(c.start.GetCaller().PID(), fx.StoreInline)
	}
	for _, n := range fx.Fetch {
		ctx.Request(n.PID(), &messages.Get{ObjectId: c.start.GetReduce().GetTargetId(), Prefetch: true, TimeoutMs: remaining})
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
