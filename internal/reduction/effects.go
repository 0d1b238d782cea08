package reduction

import (
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A step decides in the core's own terms (effects: tasks, fetches,
// releases, the reply); out turns them into one Effects at the end of
// each public step, the messages in the order each node must get them,
// with the tree's live-view event and the Reduce's end.

// Effects are what a step of a Reduction asks its shell to do: the Box
// every core returns (the messages to send and the timers to arm, in
// order, the nodes to watch and the events to publish), and what is the
// Reduce's own.
//
// A Send's To is a *messages.NodeRef (a store node), or one of the
// markers Requester, CallerNode, TargetNode, TargetShard and ShardOf,
// which only the shell can resolve to actors. A Timer's Msg is
// DeadlineTimer, KneeTimer or ResubscribeTimer; a timer replaces any
// pending one with the same Msg, and the shell hands it back to Step as
// the event it is. Each Watch is a *messages.NodeRef whose failure the
// shell reports as a NodeFailed step. Events describe
// repairs, the tree and the end of the Reduce, for the EventStream.
type Effects struct {
	outbox.Box
	// Knee, when set, says this step fixed the count of a knee policy
	// (for the log).
	Knee *KneeFixed
}

// KneeFixed describes how a knee policy fixed the number of sources.
type KneeFixed struct {
	Arrived int    // distinct sources arrived by then
	Count   int    // sources to reduce
	Reason  string // CompletedByKnee, CompletedByMaxObjects or CompletedByAll
	After   time.Duration
}

// Requester is the To of the ReduceReply: whoever asked for the Reduce.
type Requester struct{}

// CallerNode is the To of StoreReduced for a Reduce: the caller's store
// node, which stores a result reduced in the coordinator.
type CallerNode struct{}

// TargetNode is the To of StoreReduced for an AllReduce that pushes its
// result: the store node of the member whose shard runs the coordinator.
// The result's first copy and its registration then cost no trip across
// members, before the push brings it to the participants (the caller's
// node among them, if it held a source).
type TargetNode struct{}

// TargetShard is the To of ReleaseTarget: the directory shard that
// reserved the target and runs the coordinator.
type TargetShard struct{}

// DeadlineTimer fires at the Reduce's deadline (back to Step: a
// deadline check).
type DeadlineTimer struct{}

// KneeTimer fires when a knee policy's gate could next fix the count
// (back to Step: a check of the gate).
type KneeTimer struct{}

// ResubscribeTimer fires when the Reduction renews its subscriptions
// (back to Step: the subscriptions renewed).
type ResubscribeTimer struct{}

// DefaultResubscribe is how often a Reduction that still waits for
// sources subscribes to them again, unless Config.Resubscribe says.
const DefaultResubscribe = 500 * time.Millisecond

// effects is a step's decisions in the core's own terms; out turns them
// into messages once, at the end of a public step.
type effects struct {
	Tasks         []Task
	Rings         []ringShare // a sliced ring's participants' shares, stated instead of listed (after Tasks)
	StoreInline   *messages.StoreReduced
	Fetch         []*messages.NodeRef
	Reply         *messages.ReduceReply
	Release       []*messages.NodeRef
	ReleaseKeep   bool
	ReleaseTarget bool
	Invalidate    []Task
	Commit        []Task                      // the tree root whose result the Reduction took: it completes the target
	Mark          []*messages.NodeRef         // AllReduce participants whose copies of the result record the run (ReduceCommit.mark_only)
	Publish       []*messages.PublishLocation // to the target's shard, before the reply
	Drop          []*messages.NodeRef         // nodes whose unregistered copy of the target must go
	Abandon       []*messages.NodeRef         // nodes whose workers of an abandoned run must stop and drop their outputs
	Watch         []*messages.NodeRef
	Subscribe     []string // sources to ask their shards for again now: the copy the run used went
	Follow        []string // sources to subscribe to again, standing (see refollow)
	Events        []any
	knee          *KneeFixed
	kneeAt        time.Time // arm KneeTimer (zero: no)
}

func (fx *effects) merge(o effects) {
	fx.Tasks = append(fx.Tasks, o.Tasks...)
	fx.Rings = append(fx.Rings, o.Rings...)
	if o.StoreInline != nil {
		fx.StoreInline = o.StoreInline
	}
	fx.Fetch = append(fx.Fetch, o.Fetch...)
	if o.Reply != nil {
		fx.Reply, fx.ReleaseKeep, fx.ReleaseTarget = o.Reply, o.ReleaseKeep, o.ReleaseTarget
	}
	fx.Release = append(fx.Release, o.Release...)
	fx.Invalidate = append(fx.Invalidate, o.Invalidate...)
	fx.Commit = append(fx.Commit, o.Commit...)
	fx.Mark = append(fx.Mark, o.Mark...)
	fx.Publish = append(fx.Publish, o.Publish...)
	fx.Drop = append(fx.Drop, o.Drop...)
	fx.Abandon = append(fx.Abandon, o.Abandon...)
	fx.Watch = append(fx.Watch, o.Watch...)
	fx.Subscribe = append(fx.Subscribe, o.Subscribe...)
	fx.Follow = append(fx.Follow, o.Follow...)
	fx.Events = append(fx.Events, o.Events...)
	if o.knee != nil {
		fx.knee = o.knee
	}
	if !o.kneeAt.IsZero() {
		fx.kneeAt = o.kneeAt
	}
}

// out turns a step's decisions into messages, with what the shape that
// runs adds to them.
func (r *Reduction) out(fx effects, now time.Time) Effects {
	var s shapeOut
	if r.tree != nil {
		s.tree, s.bystanders = r.tree.event(fx.Reply, now), true
	}
	if r.inline != nil && r.inline.pushes() {
		s.storeHere, s.push = true, r.inline.result
	}
	if fx.Reply == nil && !r.over && (r.tree != nil || r.sliced != nil) {
		r.refollow(&fx, false)
	}
	s.onceBelow = r.onceBelow()
	return r.core.out(fx, now, s)
}

// shapeOut is what the output of a step takes from the shape that runs.
type shapeOut struct {
	tree       *events.ReduceTree // the tree's event, if this step changed it
	bystanders bool               // a tree's: nodes of sources without a task get the release that keeps the target
	storeHere  bool               // an inline AllReduce's: StoreReduced goes to TargetNode
	push       []byte             // an inline AllReduce's result, pushed with the participants' Gets
	onceBelow  int64              // the Subscribes' once_below (see Reduction.onceBelow)
}

// out turns a step's decisions into messages. Each message carries the
// time left until the Reduce's deadline, as of now.
func (r *core) out(fx effects, now time.Time, s shapeOut) Effects {
	e := Effects{Box: outbox.Box{Events: fx.Events}, Knee: fx.knee}
	for _, n := range fx.Watch {
		e.Watch = append(e.Watch, n)
	}
	if s.tree != nil {
		e.Events = append(e.Events, s.tree)
	}
	remaining := max(1, r.deadline.Sub(now).Milliseconds())
	for _, t := range fx.Invalidate {
		e.Send(t.Node, &messages.ReduceInvalidate{ReduceId: r.id, Position: t.Task.GetPosition(), Generation: t.Task.GetGeneration()})
	}
	for _, n := range fx.Drop {
		// RESET: a Get of the target waiting on that node asks again.
		// Before any task: a re-planned root on that node creates the
		// target anew, and one node's messages arrive in order.
		e.Send(n, &messages.DropObject{ObjectId: r.req.GetTargetId(),
			Reason: messages.Errorf(messages.ErrorCode_RESET, "the AllReduce run producing %q failed or was abandoned", r.req.GetTargetId())})
	}
	for _, n := range fx.Abandon {
		// Before the re-planned tasks, for the same reason: the node stops
		// every worker of the abandoned run (they say nothing more) and
		// spawns new ones for the new tasks.
		e.Send(n, &messages.ReduceRelease{ReduceId: r.id, TargetId: r.req.GetTargetId()})
	}
	for _, t := range fx.Tasks {
		t.Task.TimeoutMs = remaining
	}
	r.sendTasks(fx.Tasks, &e)
	for _, rs := range fx.Rings {
		rs.Share.TimeoutMs = remaining
		e.Send(rs.Node, &messages.ReduceTaskBatch{Ring: rs.Share})
	}
	if fx.StoreInline != nil {
		fx.StoreInline.TimeoutMs = remaining
		var to any = CallerNode{}
		if s.storeHere {
			to = TargetNode{}
		}
		e.Send(to, fx.StoreInline)
	}
	for _, c := range fx.Commit {
		// Before the release that keeps the target: the root completes it
		// first (one node's messages arrive in order).
		e.Send(c.Node, &messages.ReduceCommit{ReduceId: r.id, Position: c.Task.GetPosition(), Generation: c.Task.GetGeneration(),
			TargetId: r.req.GetTargetId(), ReducedIds: r.reply.GetReducedIds()})
	}
	for _, n := range fx.Fetch {
		// The Get answers TIMEOUT by itself at the deadline.
		get := &messages.Get{ObjectId: r.req.GetTargetId(), Prefetch: true, TimeoutMs: remaining}
		if s.push != nil {
			get.Pushed, get.PushedData, get.Pin = true, s.push, r.pinned(n.GetNodeId())
		}
		e.Send(n, get)
	}
	for _, n := range fx.Mark {
		// After the Gets: a node's copy of the result exists by then.
		e.Send(n, &messages.ReduceCommit{ReduceId: r.id, TargetId: r.req.GetTargetId(), ReducedIds: r.reply.GetReducedIds(), MarkOnly: true})
	}
	for _, p := range fx.Publish {
		e.Send(TargetShard{}, p)
	}
	// A success is answered before the releases that keep the target and
	// the unsubscriptions, which tell the caller nothing: sent first, they
	// held the answer up behind 2N messages of the coordinator's (32 ms of
	// a sliced AllReduce of 256 in the simulator on 10 Gbit/s links). A
	// failure's answer stays last: its releases drop the target's copies
	// and free its reservation before the caller can try again.
	early := fx.Reply != nil && fx.Reply.GetError() == nil && !fx.ReleaseTarget
	if early {
		r.answer(&e, fx.Reply, now)
	}
	for _, n := range fx.Release {
		e.Send(n, &messages.ReduceRelease{ReduceId: r.id, KeepTarget: fx.ReleaseKeep, TargetId: r.req.GetTargetId()})
	}
	if fx.ReleaseKeep && s.bystanders {
		for _, n := range r.bystanders(fx.Release) {
			// No worker there: the release only carries the bandwidth the
			// shell adds (see ReduceRelease.bandwidth) to a member that
			// took part with a source only (a leaf's is read where it
			// lies), which would otherwise learn B from no Reduce whose
			// leaf it keeps being.
			e.Send(n, &messages.ReduceRelease{ReduceId: r.id, KeepTarget: true, TargetId: r.req.GetTargetId()})
		}
	}
	if fx.ReleaseTarget {
		e.Send(TargetShard{}, &messages.ReleaseTarget{TargetId: r.req.GetTargetId(), ReduceId: r.id})
	}
	if !fx.kneeAt.IsZero() {
		e.After(fx.kneeAt, KneeTimer{})
	}
	if fx.Reply == nil {
		for _, id := range fx.Subscribe {
			// The shard answers with every copy it lists (the run ignores
			// those of failed nodes), or LOST when none is left.
			e.Send(directory.ShardOf(id), r.subscription(id, s.onceBelow))
		}
		for _, id := range fx.Follow {
			e.Send(directory.ShardOf(id), r.subscription(id, 0))
		}
		return e
	}
	for _, id := range r.req.GetSourceIds() {
		if r.followed(id) {
			e.Send(directory.ShardOf(id), &messages.Unsubscribe{ObjectId: id})
		}
	}
	if !early {
		r.answer(&e, fx.Reply, now)
	}
	return e
}

// answer sends the Reduce's reply to its caller, with the Reduce's end
// as an event.
func (r *core) answer(e *Effects, reply *messages.ReduceReply, now time.Time) {
	if r.completedBy != "" {
		reply.CompletedBy = r.completedBy
	}
	e.Send(Requester{}, reply)
	e.Events = append(e.Events, &events.ReduceDone{Reduce: r.id, Target: reply.GetTargetId(),
		Reduced: reply.GetReducedIds(), Elapsed: now.Sub(r.begun), Err: messages.ErrOrNil(reply.GetError())})
}

// sendTasks sends a step's tasks: every task of one node in one
// ReduceTaskBatch (a lone task as a ReduceTask), the nodes in the order of
// their first task, each node's tasks in the step's order. A node then
// gets its whole share in one delivery and starts it in one turn of its
// mailbox: sent one by one, the 72 tasks of a sliced AllReduce of 8
// reached a node in up to three deliveries, the last up to 45 ms after
// the first (BenchmarkSlicedAllReduceStagger). The messages to one node
// keep their order relative to the step's other messages to it
// (invalidations, drops and releases go first, see out).
func (r *core) sendTasks(tasks []Task, e *Effects) {
	if r.cfg.UnbatchedTasks {
		for _, t := range tasks {
			e.Send(t.Node, t.Task)
		}
		return
	}
	var order []string
	byNode := map[string][]Task{}
	for _, t := range tasks {
		id := t.Node.GetNodeId()
		if byNode[id] == nil {
			order = append(order, id)
		}
		byNode[id] = append(byNode[id], t)
	}
	for _, id := range order {
		ts := byNode[id]
		if len(ts) == 1 {
			e.Send(ts[0].Node, ts[0].Task)
			continue
		}
		b := &messages.ReduceTaskBatch{Tasks: make([]*messages.ReduceTask, 0, len(ts))}
		for _, t := range ts {
			b.Tasks = append(b.Tasks, t.Task)
		}
		e.Send(ts[0].Node, b)
	}
}
