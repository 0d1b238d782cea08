package coordactor

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ActorConfig is what the coordinators of one node share.
type ActorConfig struct {
	Reduce reduction.Config
	// Self is this member's store node, which stores the result of an
	// inline AllReduce (reduction.TargetNode); nil: the caller's node.
	Self *messages.NodeRef
	// PushAt is the data address to which a push of an inline AllReduce's
	// result to node goes as a control request (messages.ControlPush),
	// "" for an actor message; CallData sends it. Either nil: every push
	// is an actor message.
	PushAt func(node *messages.NodeRef) string
	// SubscribeAt is the data address to which a Subscribe to shard goes
	// as a control request (messages.ControlSubscribe; see subscribe), ""
	// for an actor message; CallData sends it. Either nil: every
	// Subscribe is an actor message.
	SubscribeAt func(shard *actor.PID) string
	CallData    func(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error)
	// WatchViaShard: a coordinator learns of a participant's end from its
	// shard's watch of that store node (WatchNode), not from a watch of
	// its own. The shard watches every live store node already; a
	// coordinator's own watch of a store node on another member is a
	// Watch message and, after it stops, an Unwatch: 14 of the 33 remote
	// messages of a 1 KiB AllReduce of 8.
	WatchViaShard bool
	// ShardFor returns the directory shard of an object id (to subscribe
	// to the sources' locations).
	ShardFor func(id string) *actor.PID
	// Estimator supplies L and B for the cost model.
	Estimator *estimator.Estimator
	Log       *logrus.Entry
	// Resubscribe is how often a coordinator that still waits for sources
	// subscribes to them again (default reduction.DefaultResubscribe): see
	// reduction.Config.Resubscribe. (Not on the EventStream's ShardRebuilt: in this
	// Proto.Actor version Subscribe races with Publish.)
	Resubscribe time.Duration
	// Stretch lengthens the re-subscription interval and the linger by the
	// process's recent scheduling delay (internal/lag): on a busy machine
	// re-asks that come faster than answers only add load. Nil keeps them.
	Stretch func(time.Duration) time.Duration
	// BeforeReceive, if set, runs before each message a coordinator
	// receives, with the Reduce's id (target#nonce), for fault injection
	// and tests. A hook that panics crashes the coordinator: its shard
	// stops it (not restarts: see internal/actors/shardactor's supervisor strategy)
	// and the Reduce fails with UNAVAILABLE.
	BeforeReceive func(reduce string, msg any)
}

// Coordinator is the actor that runs one Reduce: a child of the directory
// shard that owns the target, which reserved the target id for it. It is
// a thin shell around a Reduction: each message becomes one event, and
// step steps it on coordDrive, which carries out the Box.
type Coordinator struct {
	// span traces the Reduce (nil once ended; a no-op span when tracing
	// is off).
	span      trace.Span
	cfg       ActorConfig
	id        string
	start     *messages.StartReduce
	requester *actor.PID
	// shardStopped and withShard: see NewProps. withShard is set when the
	// coordinator stops while its shard does.
	shardStopped func() bool
	withShard    bool
	// held is the Reduce's answer, kept back until every node that
	// commits its target has said so (ReduceCommitted, or its node
	// stopped): committing (the node completes the target) reaches a node
	// on another connection than the answer reaches the caller, and a
	// commit lost with this member while the answer got out left an OK
	// for a target nobody could read. committing holds those nodes' ids.
	held       *outbox.Send
	committing map[string]bool
	// after are the sends that came after the held answer: they follow
	// it (release). Sent before it, a Reduce of 1,024 sources had its
	// answer wait behind 2,048 releases and unsubscriptions (0.125 s of a
	// 0.293 s reduce in the simulator on 10 Gbit/s links).
	after []outbox.Send
	// stopping: the actor stops; nothing more is held back.
	stopping bool
	r        *reduction.Reduction
	begun    bool
	watched  map[string]string // store node PID -> node id
	// watching are the nodes watched, to unwatch at the stop.
	watching []*actor.PID
	timers   map[any]*time.Timer // timer message -> its pending timer
	stepAt   time.Time           // when the message being handled was taken (for the debug log of task sends)
	// pushes end the data-plane pushes still running when the
	// coordinator stops (each also ends at its own deadline).
	pushes []context.CancelFunc
	// subscribing ends the data-plane Subscribes still running when the
	// coordinator stops, by source; over tells them that the Reduce
	// ended (see subscribe).
	subscribing map[string]context.CancelFunc
	over        *atomic.Bool
	// batches are the Subscribes a step queued for the data plane, by
	// member address, and batchOrder those addresses in the order of
	// their first Subscribe (see sendSubscribes).
	batches    map[string][]queuedSubscribe
	batchOrder []string
	// blind are the nodes released without a bandwidth (this member had
	// measured none). The position that measured a link may report after
	// the root did (its report crosses another connection), so an ended
	// Reduce that released nodes blind lingers up to lingerFor for that
	// report, then sends them B in a second ReduceRelease (see linger).
	blind     []*actor.PID
	lingering bool
	// locatedAt and storedAt are when the last source location and the
	// inline result's store answer came: the reply's log splits the
	// Reduce's time with them (waiting for sources, storing, the rest).
	locatedAt, storedAt time.Time
	// timeSends: the debug log is on while a step is carried out, so
	// tasks counts the step's tasks, and sendAt and sentAt are when its
	// first send started and its last one ended (the "reduce tasks sent"
	// line).
	timeSends      bool
	tasks          int
	sendAt, sentAt time.Time
}

// lingerFor bounds how long an ended Reduce waits for a late measurement.
const lingerFor = time.Second

// AttachRequester makes Requester the one the coordinator answers: the
// caller's node asked again for the same call (its first request failed
// while the shard moved) and this coordinator already runs it.
type AttachRequester struct{ Requester *actor.PID }

// lingerEnd ends a coordinator's wait for a late measurement.
type lingerEnd struct{}

// commitWaitEnd ends a coordinator's wait for its commit's confirmation
// (see Coordinator.held) at the Reduce's deadline.
type commitWaitEnd struct{}

// holds keeps back a step's successful answer while any commit is
// unconfirmed (see Coordinator.held), and the sends after it (its
// releases and unsubscriptions, see after), and records the nodes a
// step commits at (their commits go as requests, see send) as they go:
// the Reduction sends the answer after the commits.
func (c *Coordinator) holds(s outbox.Send) bool {
	if _, commit := s.Msg.(*messages.ReduceCommit); c.held != nil && !commit && !c.stopping {
		c.after = append(c.after, s)
		return true
	}
	switch m := s.Msg.(type) {
	case *messages.ReduceReply:
		if _, ok := s.To.(reduction.Requester); ok && m.GetError() == nil && len(c.committing) > 0 && c.requester != nil {
			c.held = &outbox.Send{To: s.To, Msg: m} // sent once every commit is confirmed
			return true
		}
	case *messages.ReduceCommit:
		if n, ok := s.To.(*messages.NodeRef); ok {
			if c.committing == nil {
				c.committing = map[string]bool{}
			}
			c.committing[n.GetNodeId()] = true
		}
	}
	return false
}

// committed records that node confirmed its commit (or stopped), and
// sends the held answer once none is outstanding.
func (c *Coordinator) committed(ctx actor.Context, node string) {
	if !c.committing[node] {
		return
	}
	delete(c.committing, node)
	if c.held != nil && len(c.committing) == 0 {
		c.release(ctx)
		c.finish(ctx)
	}
}

// release sends the held answer, then what came after it.
func (c *Coordinator) release(ctx actor.Context) {
	held := *c.held
	c.held = nil
	c.send(ctx, held)
	c.sendAfter(ctx)
}

// sendAfter sends the messages held back behind the answer.
func (c *Coordinator) sendAfter(ctx actor.Context) {
	after := c.after
	c.after = nil
	for _, s := range after {
		c.send(ctx, s)
	}
}

// pushAnswered is a data-plane push's end (see push).
type pushAnswered struct {
	to    *actor.PID
	node  string
	get   *messages.Get
	reply []byte
	err   error
}

// NewProps returns the props of the coordinator of one Reduce. requester
// receives the ReduceReply.
//
// shardStopped (nil: never) reports whether the coordinator's directory
// shard stopped or is restarting: a coordinator that stops with it tells
// its requester so (ReduceReply.shard_stopped), and the caller's node
// starts the Reduce again at the shard's home.
func NewProps(cfg ActorConfig, reduceID string, start *messages.StartReduce, requester *actor.PID, shardStopped func() bool) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	if cfg.Estimator == nil {
		cfg.Estimator = estimator.New(100*time.Microsecond, 1.25e9)
	}
	if cfg.Reduce.Estimator == nil {
		// The plan reports how many samples its L and B rest on.
		cfg.Reduce.Estimator = cfg.Estimator
	}
	if cfg.Reduce.Resubscribe <= 0 {
		cfg.Reduce.Resubscribe = cfg.Resubscribe
	}
	return actorutil.Props(func() actor.Actor {
		req := start.GetReduce()
		L, B, _, _ := cfg.Estimator.Estimate()
		timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
		rcfg := cfg.Reduce
		if cfg.Stretch != nil {
			rcfg.Resubscribe = cfg.Stretch(cmp.Or(rcfg.Resubscribe, reduction.DefaultResubscribe))
		}
		r := reduction.NewReductionFor(reduceID, req, start.GetCaller(), rcfg, time.Now(), timeout, L, B)
		return &Coordinator{cfg: cfg, id: reduceID, start: start, requester: requester, r: r, shardStopped: shardStopped,
			watched: map[string]string{}, timers: map[any]*time.Timer{}, subscribing: map[string]context.CancelFunc{}, batches: map[string][]queuedSubscribe{},
			over: new(atomic.Bool)}
	})
}

// Receive implements actor.Actor.
func (c *Coordinator) Receive(ctx actor.Context) {
	if h := c.cfg.BeforeReceive; h != nil {
		if b, ok := ctx.Message().(*messages.LocationUpdateBatch); ok {
			for _, u := range b.GetUpdates() {
				h(c.id, u) // each as if it had come alone
			}
		} else {
			h(c.id, ctx.Message())
		}
	}
	if c.lingering {
		c.linger(ctx, ctx.Message())
		return
	}
	c.logReport(ctx.Message())
	now := time.Now()
	c.stepAt = now
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.begun = true
		c.beginSpan()
		c.step(ctx, now, reduction.Begin{})
	case *messages.LocationUpdate:
		c.locatedAt = now
		c.step(ctx, now, m)
	case *messages.LocationUpdateBatch:
		// One shard's updates of a grouped SubscribeBatch, in its order:
		// each is stepped as if it had come alone.
		for _, u := range m.GetUpdates() {
			if c.lingering {
				break
			}
			if u != nil {
				c.locatedAt = now
				c.step(ctx, now, u)
			}
		}
	case *messages.ReduceTaskStarted:
		c.step(ctx, now, m)
	case *messages.ReduceTaskDone:
		if m.GetMeasuredBytes() > 0 && m.GetMeasuredNs() > 0 {
			// The position measured the link on its member: the next
			// Reduces this member plans (and the sliced ones it paces)
			// need B too, and a cluster that only reduces measures it
			// nowhere else. (In one process the estimator is shared, so
			// this counts that transfer twice: a heavier EWMA weight.)
			c.cfg.Estimator.ObserveTransfer(m.GetMeasuredBytes(), time.Duration(m.GetMeasuredNs()))
		}
		c.step(ctx, now, m)
	case *messages.StoreReducedReply:
		c.storedAt = now
		c.step(ctx, now, m)
	case *pushAnswered:
		c.pushAnswered(ctx, m, now)
	case *subscribeAnswered:
		c.subscribeAnswered(ctx, m, now)
	case *messages.ReduceCommitted:
		c.committed(ctx, m.GetNodeId())
	case *messages.CancelReduce:
		// Its shard sends it only for this call (its call id).
		c.cfg.Log.WithField("reduce", c.id).Debug("reduce: its caller canceled it")
		c.step(ctx, now, reduction.Cancel{})
	case *AttachRequester:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "requester": membername.Actor(m.Requester)}).Info("reduce: the caller asked again; answering its new request")
		c.requester = m.Requester
	case commitWaitEnd:
		if c.held != nil {
			c.cfg.Log.WithField("reduce", c.id).Warn("reduce: no node confirmed the commit by the deadline; answering as committed")
			c.release(ctx)
			c.finish(ctx)
		}
	case *WatchSelf:
		c.watchSelf(ctx, m.Node)
	case *actor.Terminated:
		c.committed(ctx, c.watched[actorutil.Key(m.GetWho())]) // a node that died will not answer
		c.nodeFailed(ctx, m.GetWho(), now)
	case reduction.DeadlineTimer:
		c.step(ctx, now, reduction.DeadlineTimer{})
	case reduction.KneeTimer:
		c.step(ctx, now, reduction.KneeTimer{})
	case reduction.ResubscribeTimer:
		c.step(ctx, now, reduction.ResubscribeTimer{})
	case *actor.Stopping:
		defer c.endSpan(c.stopped())
		c.stopping = true
		c.unwatchAll(ctx)
		c.over.Store(true)
		for _, cancel := range c.pushes {
			cancel()
		}
		for _, cancel := range c.subscribing {
			cancel()
		}
		c.withShard = c.shardStopped != nil && c.shardStopped()
		if c.held != nil && c.withShard {
			// Stopped with its shard before the commit was confirmed: the
			// caller's node starts the Reduce again, and the rebuilt shard
			// answers it with this result if the commit took.
			reply := proto.CloneOf(c.held.Msg.(*messages.ReduceReply))
			reply.Error = c.stopped()
			c.held.Msg = reply
			c.release(ctx)
		}
		c.sendAfter(ctx) // behind an answer that never goes: they go as they did before it was held
		var abort any = reduction.Abort{Err: c.stopped()}
		if c.withShard {
			// The caller's node starts the Reduce again at the shard's
			// home: a result already committed stays for it.
			abort = reduction.AbortForRetry{Err: c.stopped()}
		}
		c.step(ctx, now, abort)
	}
}

// nodeFailed maps a watched store node's termination to its node id.
func (c *Coordinator) nodeFailed(ctx actor.Context, who *actor.PID, now time.Time) {
	node, ok := c.watched[actorutil.Key(who)]
	if !ok {
		c.stepped(ctx, reduction.Effects{}) // nothing stepped: an ended Reduce still ends
		return
	}
	delete(c.watched, actorutil.Key(who))
	c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "node": node}).Info("reduce participant failed; repairing the tree")
	c.spanEvent(tracing.RepairEvent, attribute.String("hoplite.failed_node", node))
	c.step(ctx, now, reduction.NodeFailed{Node: node})
}

// stopped is the error of a Reduce whose coordinator stops before the
// Reduce ended (Abort ignores it otherwise).
func (c *Coordinator) stopped() *messages.Error {
	if !c.begun {
		// It crashed before it started: the caller still gets an answer,
		// and the reserved target is freed.
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce coordinator stopped before it started")
	}
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce coordinator stopped")
}

// step steps the Reduction with ev at now on coordDrive, which carries
// out its Box, then acts on the rest (stepped): the knee's decision, the
// queued Subscribes, the debug log of the tasks sent; and stops the
// coordinator once the Reduce answered.
func (c *Coordinator) step(ctx actor.Context, now time.Time, ev any) {
	c.timeSends = c.cfg.Log.Logger.IsLevelEnabled(logrus.DebugLevel)
	c.tasks, c.sendAt = 0, time.Time{}
	fx, _ := coordDrive.StepAt(ctx, c, c.r, now, ev)
	c.stepped(ctx, fx)
}

// stepped acts on what a step returned beside its Box, which is carried
// out.
func (c *Coordinator) stepped(ctx actor.Context, fx reduction.Effects) {
	if c.r.Over() {
		// A step that sent nothing (coordDrive's Route sets it otherwise).
		c.over.Store(true)
	}
	if k := fx.Knee; k != nil {
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "arrived": k.Arrived, "reduce_count": k.Count,
			"completed_by": k.Reason, "after": k.After.Round(time.Microsecond)}).Info("knee policy fixed the number of sources to reduce")
	}
	c.sendSubscribes(ctx)
	if c.timeSends && c.tasks > 0 {
		// The start of a tree (or a sliced AllReduce's every chain): with
		// the store nodes' "reduce position timeline", where a late start
		// comes from.
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "tasks": c.tasks, "sends": len(fx.Sends), "step_at_ns": c.stepAt.UnixNano(),
			"sent_at_ns": c.sendAt.UnixNano(), "step_ns": int64(c.sendAt.Sub(c.stepAt)), "send_ns": int64(c.sentAt.Sub(c.sendAt))}).Debug("reduce tasks sent")
	}
	c.timeSends = false
	if c.r.Over() {
		// Over for good: no timer may fire into a stopped actor's mailbox.
		c.stopTimers()
		if !c.begun {
			return
		}
		if c.held != nil {
			// Until the commit is confirmed, or the Reduce's deadline.
			c.arm(ctx, outbox.Timer{At: c.r.Deadline(), Msg: commitWaitEnd{}})
			return
		}
		c.finish(ctx)
	}
}

// coordDrive steps the Reduction and carries out its Box (the generic
// driver): every send goes through the coordinator's send (its markers
// resolve there, and some go as requests or on the data plane) unless
// holds keeps it back, a timer replaces the pending one with its
// message, a watched node is remembered for its Terminated, and an
// AllReduce's re-plan is logged as it is published. Set in init: its
// hooks lead back to step, which steps through it.
var coordDrive shell.Driver[*Coordinator, any, reduction.Effects]

func init() {
	coordDrive.Carrier = shell.Carrier[*Coordinator]{
		Route: func(ctx actor.Context, c *Coordinator, s outbox.Send) bool {
			if c.r.Over() {
				// Before the step's Unsubscribes go: see subscribe.
				c.over.Store(true)
			}
			if c.timeSends {
				c.countSend(s)
			}
			if !c.holds(s) {
				c.send(ctx, s)
			}
			if c.timeSends {
				c.sentAt = time.Now() // the last send's end: see step
			}
			return true
		},
		Timer: func(ctx actor.Context, c *Coordinator, t outbox.Timer) { c.arm(ctx, t) },
		Watch: func(ctx actor.Context, c *Coordinator, who any) {
			c.watchNode(ctx, who.(*messages.NodeRef))
		},
		Event: func(ctx actor.Context, c *Coordinator, e any) {
			if c.recording() {
				c.spanEvent(eventName(e))
			}
			if r, ok := e.(*events.AllReduceReplanned); ok {
				// The operator's view of it: the AllReduce goes on, in
				// another shape, without the lost sources.
				c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "node": r.Node, "lost": r.Lost, "reduce_count": r.Num, "from": r.From}).
					Info("allreduce lost a participant: re-planned as reduce-then-broadcast over the surviving sources")
			}
			ctx.ActorSystem().EventStream.Publish(e)
		},
	}
}

// countSend counts the tasks a step sends, and notes when its first
// send started (the debug log's "reduce tasks sent").
func (c *Coordinator) countSend(s outbox.Send) {
	if c.sendAt.IsZero() {
		c.sendAt = time.Now()
	}
	switch m := s.Msg.(type) {
	case *messages.ReduceTask:
		c.tasks++
	case *messages.ReduceTaskBatch:
		c.tasks += len(m.GetTasks())
		if m.GetRing() != nil {
			c.tasks += 2 * int(m.GetRing().GetSlices()) // ExpandRing's
		}
	}
}

// finish stops the coordinator of a Reduce that answered, or lingers
// first for a late measurement (see linger).
func (c *Coordinator) finish(ctx actor.Context) {
	c.stopTimers()
	if _, b, _, n := c.cfg.Estimator.Estimate(); n > 0 && len(c.blind) > 0 {
		// Measured while the answer waited for its commit's confirmation.
		for _, pid := range c.blind {
			ctx.Send(pid, &messages.ReduceRelease{ReduceId: c.id, KeepTarget: true, Bandwidth: b})
		}
		c.blind = nil
	}
	if len(c.blind) > 0 {
		c.lingering = true
		c.arm(ctx, outbox.Timer{At: time.Now().Add(c.stretch(lingerFor)), Msg: lingerEnd{}})
		return
	}
	ctx.Stop(ctx.Self())
}

// linger is an ended Reduce's wait for a position's late report of a
// measured link: with it, the nodes released without a bandwidth get B
// in a second ReduceRelease (a release of a Reduce whose workers are gone
// only records B). Anything else is late too, and ignored.
func (c *Coordinator) linger(ctx actor.Context, msg any) {
	switch m := msg.(type) {
	case *messages.ReduceTaskDone:
		if m.GetMeasuredBytes() <= 0 || m.GetMeasuredNs() <= 0 {
			return
		}
		c.cfg.Estimator.ObserveTransfer(m.GetMeasuredBytes(), time.Duration(m.GetMeasuredNs()))
		_, b, _, n := c.cfg.Estimator.Estimate()
		if n == 0 {
			return
		}
		for _, pid := range c.blind {
			ctx.Send(pid, &messages.ReduceRelease{ReduceId: c.id, KeepTarget: true, Bandwidth: b})
		}
		c.stopTimers()
		ctx.Stop(ctx.Self())
	case lingerEnd:
		c.stopTimers()
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		c.stopTimers()
		c.unwatchAll(ctx)
	}
}

// send delivers one message. Messages that expect an answer go as
// requests, so it comes back to this coordinator.
func (c *Coordinator) send(ctx actor.Context, s outbox.Send) {
	if r, ok := s.Msg.(*messages.ReduceRelease); ok {
		if _, b, _, n := c.cfg.Estimator.Estimate(); n > 0 {
			r.Bandwidth = b // see ReduceRelease.bandwidth
		}
	}
	var to *actor.PID
	switch t := s.To.(type) {
	case *messages.NodeRef:
		to = t.PID()
	case reduction.CallerNode:
		to = c.start.GetCaller().PID()
	case reduction.TargetNode:
		to = c.start.GetCaller().PID()
		if c.cfg.Self != nil {
			to = c.cfg.Self.PID()
		}
	case reduction.Requester:
		to = c.requester
		if reply, ok := s.Msg.(*messages.ReduceReply); ok {
			if c.recording() {
				c.span.SetAttributes(attribute.Int("hoplite.reduced", len(reply.GetReducedIds())), attribute.String("hoplite.shape", reply.GetPlan().GetShape()))
			}
			c.endSpan(messages.ErrOrNil(reply.GetError()))
			if c.withShard && reply.GetError() != nil {
				reply = proto.CloneOf(reply)
				reply.ShardStopped = true
				s.Msg = reply
			}
			defer func() {
				// Let the caller's goroutine take the answer before this
				// one logs it and stops the Reduce: on a member at
				// GOMAXPROCS 1 it runs only when this one parks. In a 1
				// KiB reduce of 8 on the testbed the answer reached the
				// caller 0.16-0.27 ms after it was sent, and 0.01 ms with
				// this.
				runtime.Gosched()
				c.logReply(reply)
			}()
		}
	case reduction.TargetShard:
		to = ctx.Parent()
	case directory.ShardOf:
		to = c.cfg.ShardFor(string(t))
	}
	if to == nil {
		return // nobody to tell: a Reduce without a requester, a root actor
	}
	if r, ok := s.Msg.(*messages.ReduceRelease); ok && r.GetBandwidth() == 0 {
		c.blind = append(c.blind, to)
	}
	switch m := s.Msg.(type) {
	case *messages.ReduceCommit:
		ctx.Request(to, m) // its node confirms it (ReduceCommitted)
	case *messages.ReduceTask:
		c.logTask(m, s.To.(*messages.NodeRef))
		ctx.Request(to, c.traced(m)) // the worker reports to the sender
	case *messages.ReduceTaskBatch:
		for _, t := range m.GetTasks() {
			c.logTask(t, s.To.(*messages.NodeRef))
		}
		if sh := m.GetRing(); sh != nil {
			c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "participant": sh.GetIndex(), "of": sh.GetSlices(),
				"node": s.To.(*messages.NodeRef).GetNodeId()}).Debug("sending a sliced ring share")
		}
		ctx.Request(to, c.traced(m))
	case *messages.ReduceInvalidate:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": m.GetPosition(), "generation": m.GetGeneration(),
			"node": s.To.(*messages.NodeRef).GetNodeId()}).Debug("invalidating a tree position")
		ctx.Send(to, m)
	case *messages.Get:
		if !c.push(ctx, to, s.To.(*messages.NodeRef), m) {
			c.fetch(ctx, to, s.To.(*messages.NodeRef).GetNodeId(), m)
		}
	case *messages.Subscribe:
		if !c.subscribe(to, m) {
			ctx.Request(to, m)
		}
	case *messages.StoreReduced, *messages.Unsubscribe:
		ctx.Request(to, m)
	default: // ReduceCommit, ReduceRelease, ReleaseTarget, ReduceReply
		ctx.Send(to, m)
	}
}

// fetch runs one all_reduce Get of the result. A future per participant:
// a store node answers a Get without a sender, and the reduction.Reduction must
// know which participant is done.
func (c *Coordinator) fetch(ctx actor.Context, to *actor.PID, node string, get *messages.Get) {
	// The Get answers TIMEOUT by itself at the deadline; the future only
	// guards against an answer that never comes.
	f := ctx.RequestFuture(to, get, time.Duration(get.GetTimeoutMs())*time.Millisecond+time.Second)
	ctx.ReenterAfter(f, func(res any, err error) {
		gr, _ := res.(*messages.GetReply)
		switch {
		case errors.Is(err, actor.ErrDeadLetter), err == nil && messages.IsUndelivered(gr.GetError()):
			// Its node is gone: the watch reports it, and a failed
			// participant is not waited for.
		case err != nil:
			c.step(ctx, time.Now(), reduction.Fetched{Node: node, Err: messages.Errorf(messages.ErrorCode_TIMEOUT, "no answer to the Get of the result: %v", err)})
		default:
			if gr == nil {
				c.step(ctx, time.Now(), reduction.Fetched{Node: node, Err: messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected answer %T to a Get", res)})
				return
			}
			c.step(ctx, time.Now(), reduction.Fetched{Node: node, Err: messages.ErrOrNil(gr.GetError())})
		}
	})
}

// push sends a Get that pushes an inline result as a control request on
// the data plane, and reports whether it did. Its answer comes back as a
// pushAnswered message.
func (c *Coordinator) push(ctx actor.Context, to *actor.PID, node *messages.NodeRef, get *messages.Get) bool {
	if !get.GetPushed() || c.cfg.PushAt == nil || c.cfg.CallData == nil {
		return false
	}
	addr := c.cfg.PushAt(node)
	if addr == "" {
		return false
	}
	req, err := proto.Marshal(get)
	if err != nil || len(req) > transport.MaxControlRequest {
		return false // a result above the data plane's request limit goes as an actor message
	}
	// The store node answers TIMEOUT by itself at the deadline; the extra
	// second lets that answer come back.
	cctx, cancel := context.WithTimeout(context.Background(), time.Duration(get.GetTimeoutMs())*time.Millisecond+time.Second)
	c.pushes = append(c.pushes, cancel)
	root, self, call, id := ctx.ActorSystem().Root, ctx.Self(), c.cfg.CallData, node.GetNodeId()
	runCall(func() {
		defer cancel()
		b, err := call(cctx, addr, messages.ControlPush, req)
		root.Send(self, &pushAnswered{to: to, node: id, get: get, reply: b, err: err})
	})
	return true
}

// runCall runs a data-plane call and the report of its answer on one of
// the actors' pooled workers (actorutil.Dispatcher), not on a goroutine
// of its own: a fresh goroutine starts on the smallest stack, and
// encoding a call, and in one process serving it (the peer's Controller
// runs on the caller's goroutine), grew it by copying on every call,
// 7% of a small AllReduce's CPU in BenchmarkSmallAllReduce. A call that
// waits holds its worker; the pool starts another for the mailboxes.
func runCall(fn func()) { actorutil.Dispatcher.Schedule(fn) }

// pushAnswered ends a data-plane push. The store node's own answer,
// error or not, is in the GetReply; an error of the call itself (the
// connection failed, the member is gone or still starting, its store node
// did not answer) means the push may not have reached the node, so it
// goes again as an actor message, whose fate the node's watch decides as
// for any participant: the data plane failing is no verdict on the node.
func (c *Coordinator) pushAnswered(ctx actor.Context, m *pushAnswered, now time.Time) {
	if m.err != nil {
		if c.r.Over() {
			return
		}
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "node": m.node, "error": m.err}).Debug("push on the data plane failed; sending it as an actor message")
		c.fetch(ctx, m.to, m.node, m.get)
		return
	}
	var gr messages.GetReply
	err := proto.Unmarshal(m.reply, &gr)
	if err != nil {
		err = messages.Errorf(messages.ErrorCode_INTERNAL, "malformed answer to a push: %v", err)
	} else {
		err = messages.ErrOrNil(gr.GetError())
	}
	c.step(ctx, now, reduction.Fetched{Node: m.node, Err: err})
}

// arm (re)starts the timer for t.Msg: a timer replaces the pending one
// with the same message.
func (c *Coordinator) arm(ctx actor.Context, t outbox.Timer) {
	if old := c.timers[t.Msg]; old != nil {
		old.Stop()
	}
	self, system, msg := ctx.Self(), ctx.ActorSystem(), t.Msg
	// time.AfterFunc rather than the actor scheduler: its timers race
	// (see internal/actors/shardactor).
	c.timers[t.Msg] = time.AfterFunc(time.Until(t.At), func() { system.Root.Send(self, msg) })
}

func (c *Coordinator) stopTimers() {
	for k, t := range c.timers {
		t.Stop()
		delete(c.timers, k)
	}
}

// logReport logs a tree position's report (debug level).
func (c *Coordinator) logReport(msg any) {
	if !c.cfg.Log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		return
	}
	switch m := msg.(type) {
	case *messages.ReduceTaskStarted:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": m.GetPosition(), "generation": m.GetGeneration(),
			"error": m.GetError().GetMessage()}).Debug("tree position started")
	case *messages.ReduceTaskDone:
		c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": m.GetPosition(), "generation": m.GetGeneration(),
			"error": m.GetError().GetMessage()}).Debug("tree position done")
	}
}

func (c *Coordinator) logTask(t *messages.ReduceTask, n *messages.NodeRef) {
	if !c.cfg.Log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		return
	}
	var kids []string
	for _, k := range t.GetChildren() {
		kids = append(kids, k.GetNode().GetNodeId())
	}
	c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "position": t.GetPosition(), "generation": t.GetGeneration(),
		"node": n.GetNodeId(), "source": t.GetSourceId(), "children": kids, "root": t.GetRoot()}).Debug("sending a tree position its task")
}

func (c *Coordinator) logReply(reply *messages.ReduceReply) {
	err := messages.ErrOrNil(reply.GetError())
	level := logrus.InfoLevel
	if err != nil && !errors.Is(err, messages.ErrInvalidArgument) {
		level = logrus.WarnLevel
	}
	if !c.cfg.Log.Logger.IsLevelEnabled(level) {
		// Each WithFields below copies the fields so far: a logger that
		// drops the line would still have made them for every Reduce.
		return
	}
	entry := c.cfg.Log.WithFields(logrus.Fields{"reduce": c.id, "target": reply.GetTargetId(),
		"reduced": len(reply.GetReducedIds()), "elapsed": time.Since(c.r.Begun()).Round(time.Microsecond)})
	if err != nil {
		entry.WithField("error", err).Log(level, "reduce failed")
		return
	}
	entry = entry.WithFields(logrus.Fields{"degree": reply.GetPlan().GetDegree(), "shape": reply.GetPlan().GetShape()})
	if !c.locatedAt.IsZero() {
		entry = entry.WithField("last_location_after", c.locatedAt.Sub(c.r.Begun()).Round(time.Microsecond))
	}
	if !c.storedAt.IsZero() {
		entry = entry.WithField("stored_after", c.storedAt.Sub(c.r.Begun()).Round(time.Microsecond))
	}
	entry.Info("reduce done")
}

// stretch is d lengthened by the recent scheduling delay (see
// ActorConfig.Stretch).
func (c *Coordinator) stretch(d time.Duration) time.Duration {
	if c.cfg.Stretch == nil {
		return d
	}
	return c.cfg.Stretch(d)
}
