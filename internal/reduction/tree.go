package reduction

import (
	"errors"
	"math"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// The reduce tree: arrivals take its positions in generalized in-order
// (plan.Assignment), a subtree's tasks go out once its sources have
// arrived, and a source that goes (its node failed, its copy left the
// directory, it was lost) leaves its position to a backup while the
// position's ancestors pull again under new generations.

// treeRun is the state of a Reduce in a tree (the d-ary or chain-leaf
// shape): which source holds which position, the task generations
// sent, started and in need of a task, and what each root generation
// reduces.
type treeRun struct {
	*core

	tree    *plan.Tree
	assign  *plan.Assignment
	gen     map[int]int      // the last task generation sent per position (0: none)
	need    map[int]bool     // positions that need a task (first, or again after a repair)
	sent    map[int]bool     // positions whose current generation's task went out
	started map[int]bool     // positions whose output exists in the current generation (a leaf: placed)
	rootSet map[int][]string // per root generation: the sources it reduces
	rootAt  map[int]string   // per root generation: the node it ran on
	// staleGen: reports of this generation or older come from an
	// abandoned run (a sliced run's generation is 1): the re-planned
	// tree's tasks all have newer generations (see replan).
	staleGen int
	// lastTree is what the last ReduceTree event said, and lastTreeAt
	// when it went out (see event).
	lastTree   string
	lastTreeAt time.Time
}

// arrive places an arrived source in the tree's next open
// position, if any (else it stays a backup), and sends every task that
// its arrival completes, up to the root.
func (r *treeRun) arrive(id string, fx *effects) {
	pos, placed, err := r.assign.Arrive(id)
	if err != nil || !placed {
		return // a backup: it stays where it is
	}
	r.place(pos, id)
	for p := pos; p >= 0; p = r.tree.Parent(p) {
		r.maybeSend(p, fx)
		if !r.ready(p) {
			// Its parent waits for it, and so does every ancestor
			// above: an arrival changes no other position. (Walking on
			// to the root made a chain's n arrivals n²/2 steps: a Reduce
			// of 1,024 sources cost its coordinator 15.5 ms, against
			// 10.7 ms without, BenchmarkReduceSteps.)
			break
		}
	}
}

// place records that id now holds pos: a leaf's output is its source
// itself and is ready at once; any other position needs a task.
func (r *treeRun) place(pos int, id string) {
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

func (r *treeRun) isLeaf(p int) bool { return len(r.tree.Children(p)) == 0 && p != r.tree.Root() }

// newTreeRun plans a tree of n positions into c's plan (its shape,
// degree, prices and open positions) and starts its assignment. Reports
// of generation stale or older come from a run the tree replaces (see
// replan).
func newTreeRun(c *core, n, stale int) (*treeRun, error) {
	r := &treeRun{core: c, gen: map[int]int{}, need: map[int]bool{}, sent: map[int]bool{}, started: map[int]bool{},
		rootSet: map[int][]string{}, rootAt: map[int]string{}, staleGen: stale}
	if stale > 0 {
		for p := 0; p < n; p++ {
			r.gen[p] = stale
		}
	}
	var err error
	switch {
	case r.cfg.Shape == ShapeChainLeaf && r.cfg.ForceDegree <= 0:
		r.plan.Shape = ShapeChainLeaf
		r.tree, err = plan.NewChainLeafTree(n, plan.ChainLength(n, r.L, r.B, r.size))
	default:
		d, costs := plan.ChooseDegreeShaped(n, r.L, r.B, r.cfg.Shaper, r.size, n)
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
		if r.B > 0 && !math.IsInf(r.B, 1) {
			// The chunk the cost model priced this depth's fill with:
			// a deep chain in the link's chunk would wait for it at
			// every hop.
			r.plan.Chunk = int64(plan.ReduceChunk(n, d, r.B, r.size))
		}
	}
	if err != nil {
		return nil, err
	}
	r.plan.Degree = int32(r.tree.Degree())
	r.assign = plan.NewAssignment(r.tree)
	for p := 0; p < n; p++ {
		r.plan.Positions = append(r.plan.Positions, &messages.ReducePosition{Position: int32(p), Parent: int32(r.tree.Parent(p)), Arrival: -1})
	}
	return r, nil
}

// lastGen is the newest generation the tree's reports can have: a tree
// that replaces this one starts after it.
func (r *treeRun) lastGen() int {
	g := r.staleGen
	for _, pg := range r.gen {
		g = max(g, pg)
	}
	return g
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
func (r *treeRun) maybeSend(p int, fx *effects) {
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
		Generation: int32(r.gen[p]), Chunk: r.plan.GetChunk()}
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
func (r *treeRun) nodeOf(p int) *messages.NodeRef {
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
func (r *treeRun) ready(c int) bool {
	if r.isLeaf(c) {
		return r.started[c]
	}
	return r.sent[c]
}

func (r *treeRun) outputOf(p int) string {
	switch {
	case p == r.tree.Root():
		return r.req.GetTargetId()
	case len(r.tree.Children(p)) == 0:
		return r.assign.Holder(p)
	}
	return InternalID(r.id, p, r.gen[p])
}

// taskStarted handles a position reporting that its output exists.
func (r *treeRun) taskStarted(m *messages.ReduceTaskStarted) effects {
	p := int(m.GetPosition())
	if r.over || m.GetReduceId() != r.id || p < 0 || p >= r.tree.N() || r.gen[p] == 0 ||
		int(m.GetGeneration()) != r.gen[p] || r.need[p] || int(m.GetGeneration()) <= r.staleGen {
		return effects{} // a generation a repair has replaced
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		fx := r.fail(messages.Errorf(messages.AsError(err).GetCode(), "reduce: position %d on %s: %v", p, r.nodeOf(p).GetNodeId(), err))
		if p == r.tree.Root() && errors.Is(err, messages.ErrUnavailable) {
			return r.targetNotCreated(fx)
		}
		return fx
	}
	r.started[p] = true
	var fx effects
	if parent := r.tree.Parent(p); parent >= 0 {
		r.maybeSend(parent, &fx)
	} else if r.req.GetAllReduce() {
		// The target is streaming from its first chunk: participants start
		// fetching now, so the broadcast pipelines with the reduce. After
		// a repair (a new root generation), only new participants.
		r.askEach(r.participants(), &fx)
	}
	return fx
}

// taskDone handles a position reporting its output complete.
func (r *treeRun) taskDone(m *messages.ReduceTaskDone) effects {
	p := int(m.GetPosition())
	g := int(m.GetGeneration())
	if r.over || m.GetReduceId() != r.id || p < 0 || p >= r.tree.N() || g <= r.staleGen || g > r.gen[p] {
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
		State: messages.LocationState_COMPLETE, Size: r.size, Fingerprint: m.GetFingerprint(), Creator: true, ReduceId: r.id,
		ProducedBy: r.id, ReducedIds: r.reply.GetReducedIds()})
	return fx
}

// participants are the nodes of the sources the tree reduces, except
// the root's, which already holds the target.
func (r *treeRun) participants() []*messages.NodeRef {
	return r.nodesOf(r.assign.Placed(), map[string]bool{r.nodeOf(r.tree.Root()).GetNodeId(): true})
}

// nodeFailed repairs the tree after node failed: each source it held
// leaves its position, the next ready backup takes it (or the next
// arrival will), and the position's ancestors clear what they reduced and
// pull again, bottom-up. Other subtrees keep their progress.
func (r *treeRun) nodeFailed(node string, fx *effects) {
	for _, id := range slices.Clone(r.arrivals) {
		if s := r.sources[id]; s != nil && s.node.GetNodeId() == node {
			r.sourceGone(id, fx)
		}
	}
}

// sourceGone takes a source whose copy is gone out of the tree: the next
// ready backup takes its position, or the next arrival will.
func (r *treeRun) sourceGone(id string, fx *effects) {
	delete(r.sources, id) // it may arrive again, from a new copy
	rep, err := r.assign.Replace(id)
	if err != nil || rep.Pos < 0 {
		return // only a backup
	}
	r.repair(rep, id, fx)
}

func (r *treeRun) repair(rep plan.Replacement, failed string, fx *effects) {
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
		// An open ancestor (its holder left with no backup to take its
		// place) has no worker left to stop: its own repair stopped it.
		if n := r.nodeOf(a); n != nil && r.gen[a] > 0 && !r.need[a] {
			// Stop it now, before it finishes with the lost object in it.
			fx.Invalidate = append(fx.Invalidate, Task{Node: n, Task: &messages.ReduceTask{ReduceId: r.id, Position: int32(a), Generation: int32(r.gen[a])}})
		}
		r.need[a], r.sent[a], r.started[a] = true, false, false
	}
	// Walk up as an arrival does: a ready backup in a leaf is started at
	// once, and no later report would prompt its parent's new task.
	for p := pos; p >= 0; p = r.tree.Parent(p) {
		r.maybeSend(p, fx)
	}
}

// TreeEventEvery and TreeEventGap bound what the tree's events cost its
// coordinator: each is a snapshot of every position, and a tree of n
// positions changes at almost every one of its 3n steps (an arrival, a
// report). BenchmarkReduceSteps, a chain's steps, medians of 5 on the
// 2-vCPU AMD EPYC VM, 2026-11-29: with a snapshot at every change a
// Reduce of 16 sources cost its coordinator 352 µs, of 64 4.19 ms, of
// 1,024 0.87 s (285 µs a step: longer than the Reduce's own transfer);
// spaced, 92 µs, 0.39 ms and 15.9 ms. So a tree of more than
// TreeEventEvery positions publishes its state at most once every
// TreeEventGap of the steps' clock (the latest, at the first step after
// the gap) and always its answer's; the live view, which draws from
// them, redraws a few times a second anyway.
const (
	TreeEventEvery = 8
	TreeEventGap   = 100 * time.Millisecond
)

// event is the ReduceTree event of a step at now that changed the tree
// (a position filled, replaced, sent, started, or the Reduce answered
// with reply), nil otherwise: the live view draws the tree from these.
// A step that changed nothing a reader sees publishes nothing. A tree of
// more than TreeEventEvery positions publishes at most one event every
// TreeEventGap, and its answer's (see TreeEventGap).
func (r *treeRun) event(reply *messages.ReduceReply, now time.Time) *events.ReduceTree {
	if r.plan == nil {
		return nil
	}
	if r.reply != nil {
		reply = r.reply // fixed at the root's report, answered perhaps later
	}
	if reply == nil && len(r.plan.Positions) > TreeEventEvery && !r.lastTreeAt.IsZero() && now.Sub(r.lastTreeAt) < TreeEventGap {
		return nil
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
		return nil
	}
	r.lastTree, r.lastTreeAt = string(sig), now
	ev := &events.ReduceTree{Reduce: r.id, Target: r.req.GetTargetId(), Shape: r.plan.GetShape(), Degree: int(r.plan.GetDegree()),
		Num: len(r.plan.Positions), Size: r.size, L: r.L, B: r.B, Done: done}
	if r.completedBy != "" {
		ev.Knee = r.completedBy
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
	return ev
}
