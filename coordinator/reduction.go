package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/coordinator/kernel"
	"github.com/hoplite-go/hoplite/coordinator/plan"
	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/outbox"
)

// Estimates supplies the network's current L and B and how many
// observations each rests on (netmodel/estimator.Estimator, which the
// member's shells share).
type Estimates interface {
	Estimate() (L time.Duration, B float64, latencySamples, bandwidthSamples int)
}

// Shape names the tree shapes a Reduce can use.
const (
	ShapeDAry      = "d-ary"      // degree from the cost model T(d)
	ShapeChainLeaf = "chain-leaf" // binary tree whose leaves are chains (the published code)
	ShapeInline    = "inline"     // small objects: reduced in the coordinator, no tree
)

// Config is what every Reduction on a node shares.
type Config struct {
	// InlineLimit: sources smaller than this are reduced without a tree.
	InlineLimit int64
	// Shape is ShapeDAry (default) or ShapeChainLeaf.
	Shape string
	// ForceDegree, if > 0, overrides the cost model (experiments).
	ForceDegree int
	// Estimator, if set, supplies L and B when the plan is chosen (at the
	// first arrival, when S is known), and how many observations they rest
	// on, which the plan reports; without it the L and B given to
	// NewReduction are used, and the plan reports their sample counts as
	// not known (-1).
	Estimator Estimates
	// AllReduceShape chooses an AllReduce's shape where the sliced one is
	// possible (every source reduced, no knee policy, sources of at least
	// InlineLimit bytes): "" lets the cost model choose
	// (plan.ChooseAllReduce), ShapeSliced always slices, ShapeDAry never
	// does (reduce, then broadcast). A forced Shape or ForceDegree
	// (experiments with the tree) also keeps reduce-then-broadcast unless
	// this says ShapeSliced.
	AllReduceShape string
	// Paced says that the members pace a sliced AllReduce's streams at
	// their link's rate (transport.EgressPacer): the cost model then
	// prices the shape with PacedSlicedContention.
	Paced bool
	// Resubscribe is how often a Reduction that still waits for sources
	// subscribes to them again (DefaultResubscribe if 0). Subscriptions
	// are soft state in the directory: a shard that restarts, or moves to
	// another member, forgets them.
	Resubscribe time.Duration
	// UnbatchedTasks sends every ReduceTask as a message of its own, as
	// before ReduceTaskBatch (benchmarks: the start stagger it costs).
	UnbatchedTasks bool
	// NoRingGather makes a sliced AllReduce's gathers fetch every slice
	// from its root, as before the ring all-gather (see sliced;
	// benchmarks: both in one run).
	NoRingGather bool
	// NoInlinePush makes an inline AllReduce's participants locate its
	// result at the target's shard instead of receiving it with their
	// Gets (messages.Get.pushed), as before the push (benchmarks: both in
	// one run).
	NoInlinePush bool
}

// InternalID names the intermediate output of one generation of a tree
// position. It starts with a NUL byte, which no object id that a user may
// pass ever does. The generation is in the name so that a parent's task
// can only name the output its child's current task creates: a parent
// re-tasked after a repair never reads what an earlier generation of the
// child reduced (that object has another name), so the coordinator sends
// a parent's task without waiting for the child to report (see
// Reduction's ready) and re-tasks every invalidated ancestor at once.
func InternalID(reduceID string, pos, gen int) string {
	return fmt.Sprintf("%sreduce/%s/%d/%d", directory.InternalPrefix, reduceID, pos, gen)
}

// ValidateReduce checks a request before anything is reserved.
func ValidateReduce(r *messages.Reduce, maxIDLen int) *messages.Error {
	bad := func(format string, args ...any) *messages.Error {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: "+format, args...)
	}
	if directory.ValidateApplicationID(r.GetTargetId(), maxIDLen) != nil {
		return bad("invalid target id %q", r.GetTargetId())
	}
	if len(r.GetSourceIds()) == 0 {
		return bad("no sources")
	}
	n := int(r.GetNumObjects())
	if k := r.GetKnee(); k != nil {
		if n != 0 {
			return bad("num_objects %d with a knee policy: set one or the other", n)
		}
		if err := validateKnee(k, len(r.GetSourceIds())); err != nil {
			return bad("knee: %v", err)
		}
	} else if n < 1 || n > len(r.GetSourceIds()) {
		return bad("num_objects %d outside 1..%d", n, len(r.GetSourceIds()))
	}
	seen := map[string]bool{}
	for _, s := range r.GetSourceIds() {
		switch {
		case directory.ValidateApplicationID(s, maxIDLen) != nil:
			return bad("invalid source id %q", s)
		case seen[s]:
			return bad("duplicate source id %q", s)
		case s == r.GetTargetId():
			return bad("target %q is also a source", s)
		}
		seen[s] = true
	}
	if err := kernel.Validate(r.GetOp(), r.GetDtype(), 0); err != nil {
		return messages.AsError(err)
	}
	return nil
}

// Effects are what a step of a Reduction asks its shell to do: the Box
// every core returns (the messages to send and the timers to arm, in
// order, the nodes to watch and the events to publish), and what is the
// Reduce's own.
//
// A Send's To is a *messages.NodeRef (a store node), or one of the
// markers Requester, CallerNode, TargetNode, TargetShard and ShardOf,
// which only the shell can resolve to actors. A Timer's Msg is
// DeadlineTimer, KneeTimer or ResubscribeTimer; a timer replaces any
// pending one with the same Msg, and the shell hands it back through
// Expire, KneeCheck or Resubscribe. Each Watch is a *messages.NodeRef
// whose failure the shell reports with NodeFailed. Events describe
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

// DeadlineTimer fires at the Reduce's deadline (hand it to Expire).
type DeadlineTimer struct{}

// KneeTimer fires when a knee policy's gate could next fix the count
// (hand it to KneeCheck).
type KneeTimer struct{}

// ResubscribeTimer fires when the Reduction renews its subscriptions
// (hand it to Resubscribe).
type ResubscribeTimer struct{}

// DefaultResubscribe is how often a Reduction that still waits for
// sources subscribes to them again, unless Config.Resubscribe says.
const DefaultResubscribe = 500 * time.Millisecond

// effects is a step's decisions in the core's own terms; out turns them
// into messages once, at the end of a public step.
type effects struct {
	Tasks         []Task
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
	Events        []any
	knee          *KneeFixed
	kneeAt        time.Time // arm KneeTimer (zero: no)
}

func (fx *effects) merge(o effects) {
	fx.Tasks = append(fx.Tasks, o.Tasks...)
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
	fx.Events = append(fx.Events, o.Events...)
	if o.knee != nil {
		fx.knee = o.knee
	}
	if !o.kneeAt.IsZero() {
		fx.kneeAt = o.kneeAt
	}
}

// Task is one ReduceTask for a node.
type Task struct {
	Node *messages.NodeRef
	Task *messages.ReduceTask
}

type source struct {
	node    *messages.NodeRef
	arrival int
	inline  []byte
	// complete: the copy on node was whole (its Put had finished), so a
	// parent streaming it measures the link, not a producer.
	complete bool
}

// Reduction is the state of one Reduce: arrivals, the tree, which
// positions run, and the final answer. It has no goroutines, no clocks and
// no I/O: each method takes an event and returns Effects.
type Reduction struct {
	id       string
	start    *messages.NodeRef // the caller's node
	req      *messages.Reduce
	cfg      Config
	deadline time.Time
	L        time.Duration
	B        float64

	size     int64 // -1 until the first source arrives
	inline   bool
	sources  map[string]*source
	arrivals []string
	gone     map[string]bool // deleted sources
	tree     *plan.Tree
	assign   *plan.Assignment
	plan     *messages.ReducePlan
	gen      map[int]int      // the last task generation sent per position (0: none)
	need     map[int]bool     // positions that need a task (first, or again after a repair)
	sent     map[int]bool     // positions whose current generation's task went out
	started  map[int]bool     // positions whose output exists in the current generation (a leaf: placed)
	rootSet  map[int][]string // per root generation: the sources it reduces
	rootAt   map[int]string   // per root generation: the node it ran on
	watched  map[string]bool
	nodes    map[string]*messages.NodeRef
	// all_reduce: the participants' Gets of the result. Each node is asked
	// once (a repaired target rewinds under a running Get); a repair that
	// brings in a new participant asks it when the new root starts; a
	// participant that fails is no longer waited for.
	asked    map[string]bool // node id -> a Get was sent
	fetching map[string]bool // node id -> its Get is still running
	reply    *messages.ReduceReply
	over     bool

	// result is an inline Reduce's result once computed: an AllReduce
	// pushes it with the participants' Gets (messages.Get.pushed), and
	// records each copy at the target's shard when its node answers.
	result []byte

	begun time.Time // when the Reduce started (for ReduceDone's Elapsed)
	// A knee policy gates the tree: until the gate fixes the count,
	// arrivals wait in pending (in arrival order) and req.num_objects is 0.
	gate    *KneeGate
	gateErr error // an invalid knee policy: Begin fails the Reduce
	// sliced is set when an AllReduce reduce-scatters and all-gathers
	// (see sliced); tree and assign stay nil then.
	sliced *sliced
	// staleGen: reports of this generation or older come from an
	// abandoned run (a sliced run's generation is 1): the re-planned
	// tree's tasks all have newer generations (see replan).
	staleGen int
	// lost: sources of an AllReduce whose node died, or that the
	// directory reported lost (no copy left), until a new copy arrives
	// (see allReduceLost).
	lost map[string]bool
	// failed: nodes whose failure this Reduction applied. A node id names
	// one incarnation of a member, never reused (messages.NodeRef), so a
	// location naming one of these was sent before the failure (a shard
	// that had not heard of it yet, a resubscription that crossed it)
	// and is stale: taking it made a lost source possible again, and put
	// it on a dead node.
	failed map[string]bool
	// seen: sources a location of which arrived. A resubscription to one
	// that is missing again says so (Subscribe.located_before): a shard
	// that restarted or moved knows nothing of a source whose copies went
	// before, and answers LOST only then, instead of leaving the Reduce
	// to wait for it until its deadline.
	seen    map[string]bool
	pending []*messages.LocationUpdate
	deleted []string // sources deleted while gating, in order
	// lastTree is what the last ReduceTree event said (see treeEvent).
	lastTree string
}

// NewReduction starts a Reduction. L and B are the current estimates of
// network latency and bandwidth for the cost model.
func NewReduction(id string, req *messages.Reduce, cfg Config, now time.Time, timeout time.Duration, L time.Duration, B float64) *Reduction {
	return NewReductionFor(id, req, nil, cfg, now, timeout, L, B)
}

// NewReductionFor is NewReduction for a caller on node caller: the Reduce
// fails if that node fails (nobody would get the answer).
func NewReductionFor(id string, req *messages.Reduce, caller *messages.NodeRef, cfg Config, now time.Time, timeout time.Duration, L time.Duration, B float64) *Reduction {
	if cfg.Shape == "" {
		cfg.Shape = ShapeDAry
	}
	if cfg.Resubscribe <= 0 {
		cfg.Resubscribe = DefaultResubscribe
	}
	r := &Reduction{id: id, start: caller, req: req, cfg: cfg, deadline: now.Add(timeout), L: L, B: B, size: -1,
		sources: map[string]*source{}, gone: map[string]bool{}, gen: map[int]int{}, need: map[int]bool{}, sent: map[int]bool{},
		started: map[int]bool{}, rootSet: map[int][]string{}, rootAt: map[int]string{}, watched: map[string]bool{}, nodes: map[string]*messages.NodeRef{},
		asked: map[string]bool{}, fetching: map[string]bool{}, lost: map[string]bool{}, failed: map[string]bool{}, seen: map[string]bool{}, begun: now}
	if req.GetKnee() != nil {
		r.gate, r.gateErr = NewKneeGate(req)
	}
	return r
}

func (r *Reduction) begin() effects {
	var fx effects
	r.watch(r.start, &fx)
	if r.gateErr != nil { // validated by the store node: a bug
		fx.merge(r.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: knee: %v", r.gateErr)))
	}
	return fx
}

// Begin returns what the shell does first: watch the caller's node,
// subscribe to every source, and arm the deadline and the resubscribe
// timer.
func (r *Reduction) Begin(now time.Time) Effects {
	fx := r.out(r.begin(), now)
	if r.over {
		return fx
	}
	r.subscribe(&fx)
	fx.After(r.deadline, DeadlineTimer{})
	fx.After(now.Add(r.cfg.Resubscribe), ResubscribeTimer{})
	return fx
}

// Located handles a location update of a source at now.
func (r *Reduction) Located(u *messages.LocationUpdate, now time.Time) Effects {
	return r.out(r.located(u, now), now)
}

// Started handles a position reporting that its output exists.
func (r *Reduction) Started(m *messages.ReduceTaskStarted, now time.Time) Effects {
	return r.out(r.taskStarted(m), now)
}

// Done handles a position reporting its output complete.
func (r *Reduction) Done(m *messages.ReduceTaskDone, now time.Time) Effects {
	return r.out(r.taskDone(m), now)
}

// NodeFailed repairs the tree after a node failed (see nodeFailed); while
// a knee policy gates the tree, the arrivals on that node no longer count
// as available.
func (r *Reduction) NodeFailed(node string, now time.Time) Effects {
	return r.out(r.nodeFailed(node), now)
}

// Fetched handles the end of one Get of the result on node: an
// AllReduce participant's, or a push of an inline result (see pushes).
func (r *Reduction) Fetched(node string, err error, now time.Time) Effects {
	return r.out(r.fetched(node, err), now)
}

// Stored handles the caller's answer to StoreReduced.
func (r *Reduction) Stored(m *messages.StoreReducedReply, now time.Time) Effects {
	return r.out(r.stored(m), now)
}

// Expire fails the Reduction if its deadline has passed (DeadlineTimer);
// before it, it arms the deadline again, so a timer that fired early
// does not leave the Reduction without one.
func (r *Reduction) Expire(now time.Time) Effects {
	fx := r.out(r.expire(now), now)
	if !r.over {
		fx.After(r.deadline, DeadlineTimer{})
	}
	return fx
}

// KneeCheck asks a knee policy's gate whether a knee became known by now
// (KneeTimer).
func (r *Reduction) KneeCheck(now time.Time) Effects {
	var fx effects
	if r.gating() {
		r.gateStep(r.gate.Check(now), now, &fx)
	}
	return r.out(fx, now)
}

// Resubscribe subscribes again to the sources the Reduction still waits
// for, and arms the next renewal (ResubscribeTimer). A shard keeps one
// subscription per subscriber and object, and the Reduction ignores
// locations it already has, so doing it again is harmless.
func (r *Reduction) Resubscribe(now time.Time) Effects {
	var fx Effects
	if r.over {
		return fx
	}
	r.subscribe(&fx)
	fx.After(now.Add(r.cfg.Resubscribe), ResubscribeTimer{})
	return fx
}

// Abort fails the Reduction from outside (its actor is stopping).
func (r *Reduction) Abort(err *messages.Error, now time.Time) Effects {
	return r.out(r.abort(err), now)
}

func (r *Reduction) subscribe(fx *Effects) {
	for _, id := range r.Waiting() {
		fx.Send(directory.ShardOf(id), &messages.Subscribe{ObjectId: id, LocatedBefore: r.seen[id]})
	}
}

// out turns a step's decisions into messages. Each message carries the
// time left until the Reduce's deadline, as of now.
func (r *Reduction) out(fx effects, now time.Time) Effects {
	e := Effects{Box: outbox.Box{Events: fx.Events}, Knee: fx.knee}
	for _, n := range fx.Watch {
		e.Watch = append(e.Watch, n)
	}
	r.treeEvent(&e, fx.Reply)
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
	if fx.StoreInline != nil {
		fx.StoreInline.TimeoutMs = remaining
		var to any = CallerNode{}
		if r.pushes() {
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
		if r.pushes() && r.result != nil {
			get.Pushed, get.PushedData, get.Pin = true, r.result, r.pinned(n.GetNodeId())
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
	for _, n := range fx.Release {
		e.Send(n, &messages.ReduceRelease{ReduceId: r.id, KeepTarget: fx.ReleaseKeep, TargetId: r.req.GetTargetId()})
	}
	if fx.ReleaseKeep && r.tree != nil {
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
		return e
	}
	for _, id := range r.req.GetSourceIds() {
		e.Send(directory.ShardOf(id), &messages.Unsubscribe{ObjectId: id})
	}
	if r.gate != nil && r.gate.Num() > 0 {
		fx.Reply.CompletedBy = r.gate.Reason()
	}
	e.Send(Requester{}, fx.Reply)
	e.Events = append(e.Events, &events.ReduceDone{Reduce: r.id, Target: fx.Reply.GetTargetId(),
		Reduced: fx.Reply.GetReducedIds(), Elapsed: now.Sub(r.begun), Err: messages.ErrOrNil(fx.Reply.GetError())})
	return e
}

// treeEvent adds a ReduceTree event to e when this step changed the tree
// (a position filled, replaced, sent, started, or the Reduce answered
// with reply): the live view draws the tree from these. A step that
// changed nothing a reader sees publishes nothing.
func (r *Reduction) treeEvent(e *Effects, reply *messages.ReduceReply) {
	if r.tree == nil || r.plan == nil {
		return
	}
	if r.reply != nil {
		reply = r.reply // fixed at the root's report, answered perhaps later
	}
	done := reply != nil && reply.GetError() == nil
	stateOf := func(p int, pos *messages.ReducePosition) string {
		switch {
		case pos.GetObjectId() == "":
			return "open"
		case done:
			return "done"
		case r.isLeaf(p):
			return "ready"
		case r.started[p]:
			return "reducing"
		case r.sent[p]:
			return "sent"
		}
		return "waiting"
	}
	// The signature first, with appends only: most steps change nothing
	// the view shows, and a coordinator of 1,024 positions takes a step
	// for every report, so the event's positions are built only when it
	// goes out.
	sig := make([]byte, 0, len(r.lastTree)+16)
	for p, pos := range r.plan.Positions {
		sig = append(sig, pos.GetObjectId()...)
		sig = append(sig, '/')
		sig = append(sig, pos.GetNodeId()...)
		sig = append(sig, '/')
		sig = append(sig, stateOf(p, pos)...)
		sig = append(sig, ';')
	}
	if reply != nil {
		sig = append(sig, "answered"...)
	}
	if string(sig) == r.lastTree {
		return
	}
	r.lastTree = string(sig)
	ev := &events.ReduceTree{Reduce: r.id, Target: r.req.GetTargetId(), Shape: r.plan.GetShape(), Degree: int(r.plan.GetDegree()),
		Num: len(r.plan.Positions), Size: r.size, L: r.L, B: r.B, Done: done}
	if r.gate != nil && r.gate.Num() > 0 {
		ev.Knee = r.gate.Reason()
	}
	ev.Positions = make([]events.ReducePosition, 0, len(r.plan.Positions))
	for p, pos := range r.plan.Positions {
		ev.Positions = append(ev.Positions, events.ReducePosition{Position: p, Parent: int(pos.GetParent()), Object: pos.GetObjectId(),
			Node: pos.GetNodeId(), Arrival: int(pos.GetArrival()), State: stateOf(p, pos), Output: r.outputOf(p)})
	}
	if len(r.plan.Costs) > 0 {
		ev.Costs = make(map[int]time.Duration, len(r.plan.Costs))
		for _, c := range r.plan.Costs {
			ev.Costs[int(c.GetDegree())] = time.Duration(c.GetCostUs()) * time.Microsecond
		}
	}
	e.Events = append(e.Events, ev)
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
func (r *Reduction) sendTasks(tasks []Task, e *Effects) {
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

// gating reports whether a knee policy has not fixed the count yet.
func (r *Reduction) gating() bool { return r.gate != nil && r.gate.Num() == 0 && !r.over }

// Gating reports whether a knee policy has not fixed the count yet (the
// Reduction has no tree and counts arrivals).
func (r *Reduction) Gating() bool { return r.gating() }

// arrive records a source's location while the gate decides the count.
func (r *Reduction) arrive(u *messages.LocationUpdate, now time.Time) effects {
	var fx effects
	id := u.GetObjectId()
	if u.GetDeleted() {
		if !slices.Contains(r.deleted, id) {
			r.deleted = append(r.deleted, id)
		}
		r.pending = slices.DeleteFunc(r.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id })
		if left := len(r.req.GetSourceIds()) - len(r.deleted); left < r.gate.Needed() {
			return r.fail(messages.Errorf(messages.ErrorCode_DELETED,
				"reduce: source %q was deleted; %d sources remain, min_percent needs %d", id, left, r.gate.Needed()))
		}
		return fx
	}
	if u.GetError() != nil {
		// No copy is left (LOST): like a failed node's arrival, it is no
		// longer available (the gate still counts it: it did arrive).
		r.pending = slices.DeleteFunc(r.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id })
		return fx
	}
	if u.GetNode() == nil {
		return fx
	}
	if u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED {
		// The copy left the directory (evicted, or a partial copy whose
		// feed died): like a failed node's, it is no longer available.
		r.pending = slices.DeleteFunc(r.pending, func(p *messages.LocationUpdate) bool {
			return p.GetObjectId() == id && p.GetNode().GetNodeId() == u.GetNode().GetNodeId()
		})
		return fx
	}
	if i := slices.IndexFunc(r.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id }); i >= 0 {
		if p := r.pending[i]; p.GetNode().GetNodeId() == u.GetNode().GetNodeId() && u.GetState() == messages.LocationState_COMPLETE {
			r.pending[i] = u // its Put finished: the tree may stream it as whole
		}
		return fx
	}
	r.watch(u.GetNode(), &fx) // its node may die before the count is fixed
	r.pending = append(r.pending, u)
	r.gateStep(r.gate.Arrive(id, now), now, &fx)
	return fx
}

// gateStep plans the tree from what arrived, in arrival order, once the
// gate fixed the count; before, it arms the timer for the gate's next
// deadline.
func (r *Reduction) gateStep(num int, now time.Time, fx *effects) {
	if num == 0 {
		if at := r.gate.NextDeadline(); !at.IsZero() {
			if !at.After(now) {
				// The gate did not fire at its own deadline: ask again a
				// little later rather than at once, forever.
				at = now.Add(time.Millisecond)
			}
			fx.kneeAt = at
		}
		return
	}
	req := proto.Clone(r.req).(*messages.Reduce)
	req.NumObjects = int32(num)
	r.req = req
	fx.knee = &KneeFixed{Arrived: r.gate.Arrived(), Count: num, Reason: r.gate.Reason(), After: now.Sub(r.begun)}
	pending, deleted := r.pending, r.deleted
	r.pending, r.deleted = nil, nil
	for _, u := range pending {
		fx.merge(r.located(u, now))
	}
	for _, id := range deleted {
		fx.merge(r.located(&messages.LocationUpdate{ObjectId: id, Deleted: true}, now))
	}
}

// ID is the reduce id.
func (r *Reduction) ID() string { return r.id }

// Begun is when the Reduce started (its deadline counts from it).
func (r *Reduction) Begun() time.Time { return r.begun }

// Over reports whether the Reduction has answered.
func (r *Reduction) Over() bool { return r.over }

// Deadline is when the Reduction fails with TIMEOUT.
func (r *Reduction) Deadline() time.Time { return r.deadline }

// Located handles a location update of a source.
func (r *Reduction) located(u *messages.LocationUpdate, now time.Time) effects {
	id := u.GetObjectId()
	if r.over || r.reply != nil || !slices.Contains(r.req.GetSourceIds(), id) {
		return effects{}
	}
	if n := u.GetNode(); n != nil && r.failed[n.GetNodeId()] {
		return effects{} // sent before that node failed (see failed)
	}
	if r.gone[id] && !u.GetDeleted() {
		// Deleted ids are never used again: this location is older than
		// the deletion (an inline source's location answered on the data
		// plane, which a deletion sent as an actor message overtook).
		return effects{}
	}
	if u.GetNode() != nil && u.GetState() != messages.LocationState_LOCATION_STATE_UNSPECIFIED && !u.GetDeleted() && u.GetError() == nil {
		r.seen[id] = true
	}
	if r.gating() {
		return r.arrive(u, now)
	}
	if u.GetDeleted() {
		return r.sourceDeleted(id)
	}
	if u.GetError() != nil {
		return r.sourceLost(id)
	}
	if s := r.sources[id]; s != nil {
		same := u.GetNode() != nil && u.GetNode().GetNodeId() == s.node.GetNodeId()
		switch {
		case same && u.GetState() == messages.LocationState_COMPLETE:
			s.complete = true // its Put finished after it arrived
		case same && u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED && r.sliced != nil && !r.sliced.running:
			// Not there any more before the chains started: as if its
			// node failed (it may appear again elsewhere).
			delete(r.sources, id)
			r.arrivals = slices.DeleteFunc(r.arrivals, func(a string) bool { return a == id })
		case same && u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED && !r.inline && r.tree != nil:
			// The copy the tree uses left the directory (a receiver's
			// partial copy whose feed died, an evicted copy): the source
			// leaves its position as if its node had failed, or the tree
			// would wait for bytes that never come.
			var fx effects
			r.sourceGone(id, &fx)
			return fx
		}
		return effects{}
	}
	if u.GetNode() == nil || u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED {
		return effects{}
	}
	if r.size < 0 {
		if err := kernel.Validate(r.req.GetOp(), r.req.GetDtype(), u.GetSize()); err != nil {
			return r.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: source %q: %v", id, err))
		}
		r.size = u.GetSize()
		if fx, ok := r.choosePlan(); !ok {
			return fx
		}
	} else if u.GetSize() != r.size {
		return r.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"reduce: sources of different sizes: %q has %d bytes, %q has %d", r.arrivals[0], r.size, id, u.GetSize()))
	}
	s := &source{node: u.GetNode(), arrival: len(r.arrivals), complete: u.GetState() == messages.LocationState_COMPLETE}
	r.sources[id] = s
	delete(r.lost, id) // a new copy: it may take part again
	r.arrivals = append(r.arrivals, id)
	if r.inline {
		if !u.GetHasInline() {
			return r.fail(messages.Errorf(messages.ErrorCode_INTERNAL, "reduce: small source %q came without its bytes", id))
		}
		s.inline = u.GetInlineData()
		return r.maybeReduceInline()
	}
	var fx effects
	r.watch(s.node, &fx) // a backup's node matters too: it may replace a failed one
	if r.sliced != nil {
		fx.merge(r.slicedArrived())
		return fx
	}
	r.arriveInTree(id, &fx)
	return fx
}

// arriveInTree places an arrived source in the tree's next open
// position, if any (else it stays a backup), and sends every task that
// its arrival completes, up to the root.
func (r *Reduction) arriveInTree(id string, fx *effects) {
	pos, placed, err := r.assign.Arrive(id)
	if err != nil || !placed {
		return // a backup: it stays where it is
	}
	r.place(pos, id)
	for p := pos; p >= 0; p = r.tree.Parent(p) {
		r.maybeSend(p, fx)
	}
}

// place records that id now holds pos: a leaf's output is its source
// itself and is ready at once; any other position needs a task.
func (r *Reduction) place(pos int, id string) {
	s := r.sources[id]
	r.plan.Positions[pos].ObjectId = id
	r.plan.Positions[pos].NodeId = s.node.GetNodeId()
	r.plan.Positions[pos].Arrival = int32(s.arrival)
	if r.isLeaf(pos) {
		r.started[pos] = true
	} else {
		r.need[pos], r.sent[pos], r.started[pos] = true, false, false
	}
}

func (r *Reduction) isLeaf(p int) bool { return len(r.tree.Children(p)) == 0 && p != r.tree.Root() }

func (r *Reduction) watch(n *messages.NodeRef, fx *effects) {
	if n != nil && !r.watched[n.GetNodeId()] {
		r.watched[n.GetNodeId()] = true
		fx.Watch = append(fx.Watch, n)
	}
}

// choosePlan fixes the tree once S is known (at the first arrival).
func (r *Reduction) choosePlan() (effects, bool) {
	n := int(r.req.GetNumObjects())
	nl, nb := -1, -1
	if e := r.cfg.Estimator; e != nil {
		// The estimate as of now, not of the Reduce call: the sources'
		// Puts may have measured since.
		r.L, r.B, nl, nb = e.Estimate()
	}
	r.plan = &messages.ReducePlan{LatencyNs: int64(r.L), Bandwidth: r.B, ObjectSize: r.size,
		LatencySamples: int64(nl), BandwidthSamples: int64(nb)}
	if r.size < r.cfg.InlineLimit {
		r.inline = true
		r.plan.Shape = ShapeInline
		return effects{}, true
	}
	if r.chooseSliced(n) {
		return effects{}, true
	}
	if err := r.newTree(n); err != nil {
		return r.fail(messages.Errorf(messages.ErrorCode_INTERNAL, "reduce: tree: %v", err)), false
	}
	return effects{}, true
}

// newTree plans the tree of n positions into r.plan (its shape, degree,
// prices and open positions) and starts its assignment.
func (r *Reduction) newTree(n int) error {
	var err error
	switch {
	case r.cfg.Shape == ShapeChainLeaf && r.cfg.ForceDegree <= 0:
		r.plan.Shape = ShapeChainLeaf
		r.tree, err = plan.NewChainLeafTree(n, plan.ChainLength(n, r.L, r.B, r.size))
	default:
		d, costs := plan.ChooseDegree(n, r.L, r.B, r.size, n)
		if r.cfg.ForceDegree > 0 {
			d = min(r.cfg.ForceDegree, n)
		}
		for _, k := range slices.Sorted(mapKeys(costs)) {
			if !(r.B > 0) {
				break // unknown bandwidth: every cost is "forever", none worth reporting
			}
			r.plan.Costs = append(r.plan.Costs, &messages.DegreeCost{Degree: int32(k), CostUs: costs[k].Microseconds()})
		}
		r.plan.Shape = ShapeDAry
		r.tree, err = plan.NewTree(n, d)
	}
	if err != nil {
		return err
	}
	r.plan.Degree = int32(r.tree.Degree())
	r.assign = plan.NewAssignment(r.tree)
	for p := 0; p < n; p++ {
		r.plan.Positions = append(r.plan.Positions, &messages.ReducePosition{Position: int32(p), Parent: int32(r.tree.Parent(p)), Arrival: -1})
	}
	return nil
}

// chooseSliced decides, once S is known, whether an AllReduce of n
// sources is sliced (see sliced), and reports both shapes' modelled
// times in the plan. Only an AllReduce that reduces every source, with
// no knee policy, can be: its late arrivals, backups and repairs need the
// one tree.
func (r *Reduction) chooseSliced(n int) bool {
	if !r.req.GetAllReduce() || r.req.GetKnee() != nil || n != len(r.req.GetSourceIds()) || r.cfg.AllReduceShape == ShapeDAry {
		return false
	}
	forced := r.cfg.AllReduceShape == ShapeSliced
	if !forced && (r.cfg.Shape == ShapeChainLeaf || r.cfg.ForceDegree > 0) {
		return false
	}
	width, err := kernel.Width(r.req.GetDtype())
	if err != nil {
		return false
	}
	cut := plan.Slices(r.size, n, width)
	if n < 2 || cut == nil {
		return false
	}
	c := plan.ChooseAllReduce(n, r.L, r.B, r.size, width, n, r.cfg.Paced)
	if r.B > 0 {
		r.plan.ShapeCosts = []*messages.ShapeCost{{Shape: ShapeSliced, CostUs: c.SlicedCost.Microseconds()},
			{Shape: ShapeDAry, CostUs: c.ReduceBroadcastCost.Microseconds()}}
	}
	if !c.Sliced && !forced {
		return false
	}
	r.sliced = newSliced(n, cut)
	r.slicedPlan()
	return true
}

func mapKeys(m map[int]time.Duration) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// maybeSend sends p's task once p's subtree has arrived and every child's
// output is named (see ready).
func (r *Reduction) maybeSend(p int, fx *effects) {
	if !r.need[p] || !r.assign.Ready(p) {
		return
	}
	kids := r.tree.Children(p)
	for _, c := range kids {
		if !r.ready(c) {
			return
		}
	}
	r.gen[p]++
	r.need[p], r.sent[p], r.started[p] = false, true, false
	task := &messages.ReduceTask{ReduceId: r.id, TargetId: r.req.GetTargetId(), Op: r.req.GetOp(), Dtype: r.req.GetDtype(),
		Size: r.size, Position: int32(p), Root: p == r.tree.Root(), SourceId: r.assign.Holder(p), OutputId: r.outputOf(p),
		Generation: int32(r.gen[p])}
	if p == r.tree.Root() {
		r.rootSet[r.gen[p]] = r.assign.Placed()
		r.rootAt[r.gen[p]] = r.nodeOf(p).GetNodeId()
	}
	for _, c := range kids {
		// Only a leaf's input can be whole already: it is its source.
		// Outputs of workers are being produced while they are streamed.
		s := r.sources[r.assign.Holder(c)]
		whole := r.isLeaf(c) && s != nil && s.complete
		task.Children = append(task.Children, &messages.ReduceInput{Node: r.nodeOf(c), ObjectId: r.outputOf(c), Complete: whole})
	}
	node := r.nodeOf(p)
	r.nodes[node.GetNodeId()] = node
	fx.Tasks = append(fx.Tasks, Task{Node: node, Task: task})
}

// nodeOf is the node holding position p, nil while p is open.
func (r *Reduction) nodeOf(p int) *messages.NodeRef {
	if s := r.sources[r.assign.Holder(p)]; s != nil {
		return s.node
	}
	return nil
}

// ready reports whether a parent's task may name c's output now: a
// leaf's output is its source, ready once placed; any other position's is
// the object its current generation's task creates, named by that
// generation. The parent does not wait for c to report that the object
// exists: its stream waits for it on c's node. Sending the whole subtree
// at once saves a control round trip per level of the tree, and since
// every generation's output has its own name, a parent can never stream
// one that an earlier generation of c reduced.
func (r *Reduction) ready(c int) bool {
	if r.isLeaf(c) {
		return r.started[c]
	}
	return r.sent[c]
}

func (r *Reduction) outputOf(p int) string {
	switch {
	case p == r.tree.Root():
		return r.req.GetTargetId()
	case len(r.tree.Children(p)) == 0:
		return r.assign.Holder(p)
	}
	return InternalID(r.id, p, r.gen[p])
}

// Started handles a position reporting that its output exists.
func (r *Reduction) taskStarted(m *messages.ReduceTaskStarted) effects {
	if r.sliced != nil {
		if r.over || m.GetReduceId() != r.id {
			return effects{}
		}
		return r.slicedStarted(m)
	}
	p := int(m.GetPosition())
	if r.over || m.GetReduceId() != r.id || r.tree == nil || p < 0 || p >= r.tree.N() || r.gen[p] == 0 ||
		int(m.GetGeneration()) != r.gen[p] || r.need[p] || int(m.GetGeneration()) <= r.staleGen {
		return effects{} // a generation a repair has replaced
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		return r.fail(messages.Errorf(messages.AsError(err).GetCode(), "reduce: position %d on %s: %v", p, r.nodeOf(p).GetNodeId(), err))
	}
	r.started[p] = true
	var fx effects
	if parent := r.tree.Parent(p); parent >= 0 {
		r.maybeSend(parent, &fx)
	} else if r.req.GetAllReduce() {
		// The target is streaming from its first chunk: participants start
		// fetching now, so the broadcast pipelines with the reduce. After
		// a repair (a new root generation), only new participants.
		r.fetchNew(&fx)
	}
	return fx
}

// fetchNew asks every participant not asked yet to Get the result, and
// watches it: a participant that dies will never answer.
func (r *Reduction) fetchNew(fx *effects) {
	for _, n := range r.participants() {
		r.askFetch(n, fx)
	}
}

// askFetch sends node its Get of the result, once.
func (r *Reduction) askFetch(n *messages.NodeRef, fx *effects) {
	if id := n.GetNodeId(); !r.asked[id] {
		r.asked[id] = true
		r.fetching[id] = true
		r.watch(n, fx)
		fx.Fetch = append(fx.Fetch, n)
	}
}

// pinned says whether node's pushed copy is pinned: the caller's node's.
func (r *Reduction) pinned(node string) bool {
	return r.start != nil && r.start.GetNodeId() == node
}

// participants are the nodes of the reduced sources, except the root's,
// which already holds the target.
func (r *Reduction) participants() []*messages.NodeRef {
	seen := map[string]bool{}
	reduced := r.arrivals[:min(len(r.arrivals), int(r.req.GetNumObjects()))]
	if !r.inline {
		seen[r.nodeOf(r.tree.Root()).GetNodeId()] = true
		reduced = r.assign.Placed()
	}
	var out []*messages.NodeRef
	for _, id := range reduced {
		n := r.sources[id].node
		if !seen[n.GetNodeId()] {
			seen[n.GetNodeId()] = true
			out = append(out, n)
		}
	}
	return out
}

// Done handles a position reporting its output complete.
func (r *Reduction) taskDone(m *messages.ReduceTaskDone) effects {
	if r.sliced != nil {
		if r.over || m.GetReduceId() != r.id {
			return effects{}
		}
		return r.slicedDone(m)
	}
	p := int(m.GetPosition())
	g := int(m.GetGeneration())
	if r.over || m.GetReduceId() != r.id || r.tree == nil || p < 0 || p >= r.tree.N() || g <= r.staleGen || g > r.gen[p] {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		if g != r.gen[p] || r.need[p] {
			return effects{} // a superseded run: its failure is being repaired
		}
		return r.fail(messages.Errorf(messages.AsError(err).GetCode(), "reduce: position %d on %s: %v", p, r.nodeOf(p).GetNodeId(), err))
	}
	if p != r.tree.Root() || r.reply != nil || g != r.gen[p] || r.need[p] || !r.sent[p] || r.rootAt[g] != r.nodeOf(p).GetNodeId() {
		// Not the root, already answered, or a generation a repair
		// replaced (or is about to: an input was lost and the root was
		// invalidated). That root holds its target's last byte back until
		// a commit that never comes, so nobody read it whole, and its
		// worker rewinds it, or drops it when released.
		return effects{}
	}
	// The root's generation reduced exactly the sources placed when it
	// was sent, each once. This is the moment the result is fixed: the
	// root completes the target only on this commit, and the target's
	// shard offers it as the whole result (ending the reservation) before
	// the reply.
	r.reply = r.success(r.rootSet[g])
	fx := r.maybeFinish()
	root := r.nodeOf(p)
	fx.Commit = append(fx.Commit, Task{Node: root, Task: &messages.ReduceTask{ReduceId: r.id, Position: int32(p), Generation: int32(g)}})
	if r.req.GetAllReduce() {
		fx.Mark = append(fx.Mark, r.participants()...)
	}
	fx.Publish = append(fx.Publish, &messages.PublishLocation{ObjectId: r.req.GetTargetId(), Node: root,
		State: messages.LocationState_COMPLETE, Size: r.size, Fingerprint: m.GetFingerprint(), Creator: true, ReduceId: r.id})
	return fx
}

// NodeFailed repairs the tree after a node failed: each source it held
// leaves its position, the next ready backup takes it (or the next
// arrival will), and the position's ancestors clear what they reduced and
// pull again, bottom-up. Other subtrees keep their progress.
func (r *Reduction) nodeFailed(node string) effects {
	if r.over {
		return effects{}
	}
	r.failed[node] = true
	// A participant that died will not answer its Get of the result, and
	// needs no copy any more.
	delete(r.fetching, node)
	if r.reply != nil {
		// The result is fixed (an AllReduce is only waiting for its
		// participants): the tree must not change under it. A participant
		// whose copy is lost fails the AllReduce through its fetch.
		return r.maybeFinish()
	}
	if r.start != nil && r.start.GetNodeId() == node {
		return r.fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce: the caller's node %s failed", node))
	}
	delete(r.watched, node)
	var fx effects
	if r.req.GetAllReduce() && !r.gating() && !r.inline && (r.sliced != nil || r.tree != nil) && r.allReduceNodeFailed(node, &fx) {
		return fx
	}
	if r.gating() {
		// An arrival whose copy died no longer counts as available (the
		// gate still counts it: it did arrive).
		r.pending = slices.DeleteFunc(r.pending, func(u *messages.LocationUpdate) bool { return u.GetNode().GetNodeId() == node })
		return fx
	}
	if r.inline || r.tree == nil {
		return fx // small sources live in the directory, not on the node
	}
	for _, id := range slices.Clone(r.arrivals) {
		if s := r.sources[id]; s != nil && s.node.GetNodeId() == node {
			r.sourceGone(id, &fx)
		}
	}
	return fx
}

// sourceLost handles the directory's word that a source has no copy
// left (LocationUpdate.error, LOST): as the failure of the node holding
// it would. A located source leaves the run (an AllReduce that cannot
// make up n without it lowers n; a tree repairs with a backup). An
// AllReduce lowers n for one never located too: nothing else tells it
// that such a source is gone (the failure of its node names no source
// the Reduction knew of). A plain Reduce counts a lost source, located or
// not, as one that cannot take part until a new copy of it arrives (it
// may be Put again), and fails with LOST once fewer than n can: it waited
// for them until its deadline, and answered TIMEOUT about sources the
// directory knew were gone. Inline sources live in the directory and are
// never lost.
func (r *Reduction) sourceLost(id string) effects {
	var fx effects
	if r.inline {
		return fx
	}
	// A located source's loss is its node's, as far as anybody can tell
	// (the operator's log and AllReduceReplanned name it): the shard's
	// report and that node's failure notice race, and either may come
	// first.
	node := ""
	if s := r.sources[id]; s != nil && s.node != nil {
		node = s.node.GetNodeId()
	}
	if r.req.GetAllReduce() && r.allReduceLost(node, []string{id}, &fx) {
		return fx
	}
	if r.sources[id] != nil && r.tree != nil {
		r.sourceGone(id, &fx)
	}
	if r.req.GetAllReduce() {
		return fx
	}
	r.lost[id] = true
	if n := int(r.req.GetNumObjects()); r.possible() < n {
		var lost []string
		for _, s := range r.req.GetSourceIds() {
			if r.lost[s] && !r.gone[s] {
				lost = append(lost, s)
			}
		}
		return r.fail(messages.Errorf(messages.ErrorCode_LOST,
			"reduce: sources %s are lost (no copy is left); %d sources remain for num_objects %d; Put them again to reduce them",
			strings.Join(lost, ", "), r.possible(), n))
	}
	return fx
}

// sourceGone takes a source whose copy is gone out of the tree: the next
// ready backup takes its position, or the next arrival will.
func (r *Reduction) sourceGone(id string, fx *effects) {
	delete(r.sources, id) // it may arrive again, from a new copy
	rep, err := r.assign.Replace(id)
	if err != nil || rep.Pos < 0 {
		return // only a backup
	}
	r.repair(rep, id, fx)
}

func (r *Reduction) repair(rep plan.Replacement, failed string, fx *effects) {
	pos := rep.Pos
	// Reports of the lost worker's generation are stale from now on.
	r.gen[pos]++
	fx.Events = append(fx.Events, &events.TreeNodeReplaced{Reduce: r.id, Position: pos, Failed: failed, Replacement: rep.NewID})
	r.plan.Positions[pos].ObjectId, r.plan.Positions[pos].NodeId, r.plan.Positions[pos].Arrival = "", "", -1
	r.started[pos], r.need[pos], r.sent[pos] = false, false, false
	if rep.NewID != "" {
		r.place(pos, rep.NewID)
	}
	if len(rep.Invalidate) > 0 {
		fx.Events = append(fx.Events, &events.AncestorsInvalidated{Reduce: r.id, Positions: slices.Clone(rep.Invalidate)})
	}
	for _, a := range rep.Invalidate {
		if r.gen[a] > 0 && !r.need[a] {
			// Stop it now, before it finishes with the lost object in it.
			fx.Invalidate = append(fx.Invalidate, Task{Node: r.nodeOf(a), Task: &messages.ReduceTask{ReduceId: r.id, Position: int32(a), Generation: int32(r.gen[a])}})
		}
		r.need[a], r.sent[a], r.started[a] = true, false, false
	}
	// Walk up as an arrival does: a ready backup in a leaf is started at
	// once, and no later report would prompt its parent's new task.
	for p := pos; p >= 0; p = r.tree.Parent(p) {
		r.maybeSend(p, fx)
	}
}

// Fetched handles the end of one Get of the result on node: an
// AllReduce participant's, or a push of an inline result (see pushes).
func (r *Reduction) fetched(node string, err error) effects {
	if r.over || !r.fetching[node] {
		return effects{} // not asked, already answered, or failed since
	}
	if err != nil {
		what := "allreduce"
		if !r.req.GetAllReduce() {
			what = "reduce"
		}
		return r.fail(messages.Errorf(messages.AsError(err).GetCode(), "%s: %s could not fetch the result: %v", what, node, err))
	}
	delete(r.fetching, node)
	fx := r.maybeFinish()
	if !r.pushes() || r.result == nil {
		return fx
	}
	n := r.start
	if !r.pinned(node) {
		n = nil
		for _, p := range r.participants() {
			if p.GetNodeId() == node {
				n = p
			}
		}
	}
	if n != nil {
		// The node stored the pushed result (or already held a copy,
		// which its own fetch registered: recording it again changes
		// nothing). Before the reply, so that a Delete after it reaches
		// this copy. The caller's pinned copy is a creator's, as its
		// republication would say.
		fx.Publish = append(fx.Publish, &messages.PublishLocation{ObjectId: r.req.GetTargetId(), Node: n,
			State: messages.LocationState_COMPLETE, Size: int64(len(r.result)), Fingerprint: fingerprint.Of(r.result),
			Creator: r.pinned(node)})
	}
	return fx
}

func (r *Reduction) maybeFinish() effects {
	if r.reply == nil || len(r.fetching) > 0 {
		return effects{}
	}
	r.over = true
	return effects{Reply: r.reply, Release: r.releaseNodes(), ReleaseKeep: true}
}

// pushes says whether this Reduction, an AllReduce of inline sources,
// stores its result on its own member (TargetNode) and sends it with Gets
// (Get.pushed) to the participants and to the caller's node, pinned there
// as the caller's own copy. The participants then locate nothing, and the
// result's first copy costs no round trips between the caller's member
// and the coordinator's (a store, then its registration at the
// coordinator's shard), which the caller's push overlaps with the
// participants'. A plain Reduce stores on the caller's node as before:
// pushing to it instead measured no faster (1 KiB, 8 hosts, 41
// interleaved repetitions: 0.97x) at more CPU.
func (r *Reduction) pushes() bool {
	return r.inline && r.req.GetAllReduce() && !r.cfg.NoInlinePush
}

func (r *Reduction) maybeReduceInline() effects {
	n := int(r.req.GetNumObjects())
	if len(r.arrivals) != n {
		return effects{}
	}
	acc := append([]byte(nil), r.sources[r.arrivals[0]].inline...)
	for _, id := range r.arrivals[1:n] {
		if err := kernel.Accumulate(r.req.GetOp(), r.req.GetDtype(), acc, r.sources[id].inline); err != nil {
			return r.fail(messages.AsError(err))
		}
	}
	if acc == nil {
		acc = []byte{}
	}
	for i, id := range r.arrivals[:n] {
		r.plan.Positions = append(r.plan.Positions, &messages.ReducePosition{Position: int32(i), Parent: -1,
			ObjectId: id, NodeId: r.sources[id].node.GetNodeId(), Arrival: int32(i)})
	}
	r.result = acc
	return effects{StoreInline: &messages.StoreReduced{ReduceId: r.id, TargetId: r.req.GetTargetId(), Data: acc,
		ReducedIds: slices.Clone(r.arrivals[:n])}}
}

// Stored handles the caller's answer to StoreInline.
func (r *Reduction) stored(m *messages.StoreReducedReply) effects {
	if r.over || !r.inline || m.GetReduceId() != r.id {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		return r.fail(messages.AsError(err))
	}
	r.reply = r.success(r.arrivals[:r.req.GetNumObjects()])
	var fx effects
	if r.pushes() && r.start != nil {
		// The caller's node first (once, if it is a participant too).
		r.askFetch(r.start, &fx)
	}
	if !r.req.GetAllReduce() {
		if len(fx.Fetch) == 0 {
			return r.maybeFinish()
		}
		return fx
	}
	// The node that stored the result answers its prefetch at once, so it
	// needs no special case.
	r.fetchNew(&fx)
	if len(fx.Fetch) == 0 {
		return r.maybeFinish()
	}
	return fx
}

// Waiting lists the sources the Reduction still wants locations for:
// while it has no result, every source it does not hold (a missing one
// may complete the tree, a lost one may come back as a backup; while a
// knee policy gates, every source not arrived). Resubscribe asks for
// them again periodically, as the directory may have lost its
// subscriptions (a shard restarted or moved).
func (r *Reduction) Waiting() []string {
	if r.over || r.reply != nil {
		return nil
	}
	var ids []string
	for _, id := range r.req.GetSourceIds() {
		held := r.sources[id] != nil || slices.ContainsFunc(r.pending, func(u *messages.LocationUpdate) bool { return u.GetObjectId() == id })
		if !held && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// Expire fails the Reduction if its deadline has passed.
func (r *Reduction) expire(now time.Time) effects {
	if r.over || now.Before(r.deadline) {
		return effects{}
	}
	if r.gating() {
		return r.fail(messages.Errorf(messages.ErrorCode_TIMEOUT,
			"reduce: knee policy: %d of %d sources arrived before the deadline and no knee was accepted (%d needed by min_percent)",
			r.gate.Arrived(), len(r.req.GetSourceIds()), r.gate.Needed()))
	}
	n := int(r.req.GetNumObjects())
	if held := len(r.sources); held < n {
		return r.fail(messages.Errorf(messages.ErrorCode_TIMEOUT,
			"reduce: only %d of the %d sources needed were available before the deadline; missing: %s", held, n, strings.Join(r.Waiting(), ", ")))
	}
	return r.fail(messages.Errorf(messages.ErrorCode_TIMEOUT, "reduce: the tree did not finish before the deadline"))
}

// Abort fails the Reduction from outside (its actor is stopping).
func (r *Reduction) abort(err *messages.Error) effects {
	if r.over {
		return effects{}
	}
	return r.fail(err)
}

func (r *Reduction) sourceDeleted(id string) effects {
	r.gone[id] = true
	if r.sliced != nil {
		// A sliced AllReduce reduces every source.
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED, "allreduce: source %q was deleted during the AllReduce", id))
	}
	used := r.sources[id] != nil && (r.inline && r.sources[id].arrival < int(r.req.GetNumObjects()) ||
		!r.inline && r.assign.Position(id) >= 0)
	if used {
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED, "reduce: source %q was deleted during the Reduce", id))
	}
	var fx effects
	if r.sources[id] != nil && !r.inline && r.tree != nil {
		// A backup whose bytes are gone must not take the place of a
		// failed position (the knee simulation's seed 2163 reduced one).
		r.sourceGone(id, &fx)
	}
	if possible := r.possible(); possible < int(r.req.GetNumObjects()) {
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED,
			"reduce: source %q was deleted; %d sources remain for num_objects %d", id, possible, r.req.GetNumObjects()))
	}
	return fx
}

func (r *Reduction) success(reduced []string) *messages.ReduceReply {
	in := map[string]bool{}
	for _, id := range reduced {
		in[id] = true
	}
	reply := &messages.ReduceReply{TargetId: r.req.GetTargetId(), ReducedIds: slices.Clone(reduced), Plan: r.plan}
	for _, id := range r.req.GetSourceIds() {
		if !in[id] {
			reply.UnreducedIds = append(reply.UnreducedIds, id)
		}
	}
	return reply
}

func (r *Reduction) fail(err *messages.Error) effects {
	r.over = true
	fx := effects{Reply: &messages.ReduceReply{TargetId: r.req.GetTargetId(), Error: err, Plan: r.plan},
		Release: r.releaseNodes(), ReleaseTarget: true}
	if r.sliced != nil {
		fx.Drop = r.slicedCopies()
	}
	return fx
}

// bystanders are the live nodes of the arrived sources that ran no task
// (not in released), in node id order.
func (r *Reduction) bystanders(released []*messages.NodeRef) []*messages.NodeRef {
	seen := map[string]bool{}
	for _, n := range released {
		seen[n.GetNodeId()] = true
	}
	var out []*messages.NodeRef
	for _, s := range r.sources {
		id := s.node.GetNodeId()
		if !seen[id] && !r.failed[id] {
			seen[id] = true
			out = append(out, s.node)
		}
	}
	slices.SortFunc(out, func(a, b *messages.NodeRef) int { return strings.Compare(a.GetNodeId(), b.GetNodeId()) })
	return out
}

func (r *Reduction) releaseNodes() []*messages.NodeRef {
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range r.nodes {
			if !yield(id) {
				return
			}
		}
	})
	out := make([]*messages.NodeRef, 0, len(ids))
	for _, id := range ids {
		out = append(out, r.nodes[id])
	}
	return out
}
