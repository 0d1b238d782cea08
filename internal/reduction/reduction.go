package reduction

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// Estimates supplies the network's current L and B and how many
// observations each rests on (internal/netmodel/estimator.Estimator, which the
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
	// Shaper is the members' links' token bucket, if the operator stated
	// it (a member's LinkRate and LinkBurst): where the link bounds B, a
	// reduce tree's levels wait only for what its burst does not pass at
	// once (plan.FillShaped). The zero Shaper is none.
	Shaper plan.Shaper
	// MinSlice keeps the cost model from slicing an AllReduce whose
	// slices (S/n) would be smaller than this (0: no minimum); a forced
	// ShapeSliced still slices. The members set it to the store
	// allocator's large-buffer threshold (bufalloc.HugeMin, 4 MiB): a
	// smaller slice's buffers are new memory every time, neither cut
	// from the warm reserve nor kept, and their page faults outweigh
	// what slicing saves (docs/allreduce.md has the measurements).
	MinSlice int64
	// Resubscribe is how often a Reduction that still waits for sources
	// subscribes to them again (DefaultResubscribe if 0). Subscriptions
	// are soft state in the directory: a shard that restarts, or moves to
	// another member, forgets them.
	Resubscribe time.Duration
	// UnbatchedTasks sends every ReduceTask as a message of its own
	// instead of one ReduceTaskBatch per node: a benchmark's baseline for
	// the start stagger that batching saves.
	UnbatchedTasks bool
	// NoRingGather makes a sliced AllReduce's gathers fetch every slice
	// from its root instead of around the ring (see slicedRun): a
	// benchmark's baseline for the ring all-gather.
	NoRingGather bool
	// ListRingTasks sends a sliced ring's participants their 2n tasks
	// each, listed, instead of their shares (messages.SlicedRingShare):
	// a benchmark's baseline, and the tests' proof that a share lists
	// the same tasks.
	ListRingTasks bool
	// NoInlinePush makes an inline AllReduce's participants locate its
	// result at the target's shard instead of receiving it with their
	// Gets (messages.Get.pushed): a benchmark's baseline for the push.
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

// Task is one ReduceTask for a node.
type Task struct {
	Node *messages.NodeRef
	Task *messages.ReduceTask
}

type source struct {
	node    *messages.NodeRef
	arrival int
	// complete: the copy on node was whole (its Put had finished), so a
	// parent streaming it measures the link, not a producer.
	complete bool
}

// Reduction is the state of one Reduce. It has no goroutines, no clocks
// and no I/O: each method takes an event and returns Effects.
//
// What every shape shares is its core (the request, the sources as they
// arrive, the plan, the nodes with tasks, the answer, and the output
// every step returns). A shape is chosen at the first arrival, when the
// sources' size is known, and owns the state only it uses: the inline
// reduce, the tree, or the sliced AllReduce. A knee policy's gate is a
// phase before the shape; a sliced AllReduce that loses a participant
// gives way to a tree (replan). The Reduction only routes each event to
// the one that runs; no shape reaches another's state.
type Reduction struct {
	*core

	// knee is a knee policy's phase until its gate fixes the count; till
	// then req.num_objects is 0 and no shape is chosen.
	knee *kneePhase
	// At most one shape runs: none until the first arrival (or after a
	// re-plan before any), then one of these.
	inline *inlineRun // sources under the inline limit, reduced here
	tree   *treeRun   // a d-ary or chain-leaf tree
	sliced *slicedRun // an AllReduce's reduce-scatter and all-gather
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
	c := &core{id: id, start: caller, req: req, cfg: cfg, deadline: now.Add(timeout), L: L, B: B, size: -1,
		sources: map[string]*source{}, gone: map[string]bool{}, watched: map[string]bool{}, nodes: map[string]*messages.NodeRef{},
		asked: map[string]bool{}, fetching: map[string]bool{}, lost: map[string]bool{}, failed: map[string]bool{}, seen: map[string]bool{}, begun: now,
		subs: map[string]int{}, ended: map[string]int{}}
	r := &Reduction{core: c}
	if req.GetKnee() != nil {
		r.knee = newKneePhase(c, req)
	}
	return r
}

func (r *Reduction) begin() effects {
	var fx effects
	r.watch(r.start, &fx)
	if r.knee != nil && r.knee.err != nil { // validated by the store node: a bug
		fx.merge(r.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: knee: %v", r.knee.err)))
	}
	return fx
}

// beginStep is Step's Begin: watch the caller's node, subscribe to
// every source, and arm the deadline and the resubscribe timer.
func (r *Reduction) beginStep(now time.Time) Effects {
	fx := r.out(r.begin(), now)
	if r.over {
		return fx
	}
	r.subscribe(&fx)
	fx.After(r.deadline, DeadlineTimer{})
	fx.After(now.Add(r.cfg.Resubscribe), ResubscribeTimer{})
	return fx
}

// started handles a position reporting that its output exists.
func (r *Reduction) started(m *messages.ReduceTaskStarted, now time.Time) Effects {
	var fx effects
	switch {
	case r.sliced != nil:
		if id, node, ok := r.sliced.goneSource(m.GetReduceId(), int(m.GetPosition()), int(m.GetGeneration()), messages.ErrOrNil(m.GetError())); ok {
			fx = r.slicedSourceGone(id, node)
			break
		}
		fx = r.sliced.taskStarted(m)
	case r.tree != nil:
		fx = r.tree.taskStarted(m)
	}
	return r.out(fx, now)
}

// done handles a position reporting its output complete.
func (r *Reduction) done(m *messages.ReduceTaskDone, now time.Time) Effects {
	var fx effects
	switch {
	case r.sliced != nil:
		if id, node, ok := r.sliced.goneSource(m.GetReduceId(), int(m.GetPosition()), int(m.GetGeneration()), messages.ErrOrNil(m.GetError())); ok {
			fx = r.slicedSourceGone(id, node)
			break
		}
		fx = r.sliced.taskDone(m)
	case r.tree != nil:
		fx = r.tree.taskDone(m)
	}
	return r.out(fx, now)
}

// stored handles the caller's answer to StoreReduced.
func (r *Reduction) stored(m *messages.StoreReducedReply, now time.Time) Effects {
	var fx effects
	if r.inline != nil {
		fx = r.inline.stored(m)
	}
	return r.out(fx, now)
}

// expireStep fails the Reduction if its deadline has passed
// (DeadlineTimer); before it, it arms the deadline again, so a timer
// that fired early does not leave the Reduction without one.
func (r *Reduction) expireStep(now time.Time) Effects {
	fx := r.out(r.expire(now), now)
	if !r.over {
		fx.After(r.deadline, DeadlineTimer{})
	}
	return fx
}

// kneeCheck asks a knee policy's gate whether a knee became known by
// now (KneeTimer).
func (r *Reduction) kneeCheck(now time.Time) Effects {
	var fx effects
	if r.gating() {
		r.gateStep(r.knee.gate.Check(now), now, &fx)
	}
	return r.out(fx, now)
}

// resubscribe subscribes again to the sources the Reduction still waits
// for, and arms the next renewal (ResubscribeTimer). A shard keeps one
// subscription per subscriber and object, and the Reduction ignores
// locations it already has, so doing it again is harmless.
func (r *Reduction) resubscribe(now time.Time) Effects {
	if r.over {
		return Effects{}
	}
	var follow effects
	if r.inline != nil && r.inline.result == nil {
		r.refollow(&follow, true)
	}
	fx := r.out(follow, now)
	r.subscribe(&fx)
	fx.After(now.Add(r.cfg.Resubscribe), ResubscribeTimer{})
	return fx
}

// cancel is Step's Cancel.
func (r *Reduction) cancel(now time.Time) Effects {
	var fx effects
	if !r.over && !r.committing() {
		fx = r.fail(messages.Errorf(messages.ErrorCode_CANCELED, "reduce into %q: %s", r.req.GetTargetId(), abandonedAtCancel))
	}
	return r.out(fx, now)
}

// abandonedAtCancel ends the message of a coordinator's CANCELED answer
// (see AbandonedAtCancel).
const abandonedAtCancel = "its coordinator abandoned it at its caller's cancel, before its commit"

// AbandonedAtCancel reports whether err is a coordinator's CANCELED
// answer to its caller's cancel: the Reduce stopped before its commit,
// so nothing of it is ever readable. A CANCELED its caller's own
// context made (the coordinator's answer did not come within the
// caller's grace) says nothing of how the Reduce ended.
func AbandonedAtCancel(err error) bool {
	var me *messages.Error
	return errors.As(err, &me) && me.GetCode() == messages.ErrorCode_CANCELED && strings.HasSuffix(me.GetMessage(), abandonedAtCancel)
}

// committing reports whether the Reduction's commit went out: its
// result is fixed (reply), or the inline result it computed was sent to
// be stored as the target.
func (r *Reduction) committing() bool {
	return r.reply != nil || r.inline != nil && r.inline.result != nil
}

func (r *Reduction) subscribe(fx *Effects) {
	once := r.onceBelow()
	for _, id := range r.Waiting() {
		fx.Send(directory.ShardOf(id), r.subscription(id, once))
	}
}

// onceBelow is the once_below of the Reduction's Subscribes to sources
// it waits for: until a streamed plan runs, a source that comes with its
// bytes is reduced here (inline), and nothing more of it is needed once
// they came. The shard then keeps no subscription, and the Reduction
// sends no Unsubscribe: of a small AllReduce's remote messages, one per
// source. While a knee policy gates, arrivals are counted as they come,
// and every subscription stands.
func (r *Reduction) onceBelow() int64 {
	if r.knee != nil || r.tree != nil || r.sliced != nil {
		return 0
	}
	return r.cfg.InlineLimit
}

// refollow subscribes again, standing, to the sources whose
// subscriptions their shards ended, when the Reduction needs their
// updates after all: a streamed plan (a tree, or slices) follows its
// sources' copies for its repairs; an inline one that still waits for
// sources (ResubscribeTimer: this is not urgent) hears of the deletion
// of one it holds, which fails it (see sourceDeleted), as a standing
// subscription would have told it.
func (r *Reduction) refollow(fx *effects, arrivedOnly bool) {
	if r.unfollowed == 0 {
		return
	}
	for _, id := range r.req.GetSourceIds() {
		if r.subs[id] == 0 || r.followed(id) || r.gone[id] || slices.Contains(fx.Subscribe, id) || slices.Contains(fx.Follow, id) {
			continue
		}
		if arrivedOnly && r.sources[id] == nil {
			continue
		}
		fx.Follow = append(fx.Follow, id)
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

// located handles a location update of a source.
func (r *Reduction) located(u *messages.LocationUpdate, now time.Time) effects {
	id := u.GetObjectId()
	if r.over || r.reply != nil || !r.names(id) {
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
		case same && u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED && r.sliced != nil:
			// Gone from a node that lives, after the chains started.
			return r.slicedSourceGone(id, s.node.GetNodeId())
		case same && u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED && r.inline == nil && r.tree != nil:
			// The copy the tree uses left the directory (a receiver's
			// partial copy whose feed died, an evicted copy): the source
			// leaves its position as if its node had failed, or the tree
			// would wait for bytes that never come.
			var fx effects
			r.tree.sourceGone(id, &fx)
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
		if fx, ok := r.choosePlan(u.GetHasInline()); !ok {
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
	if r.inline != nil {
		if u.GetHasInline() {
			return r.inline.arrived(id, u.GetInlineData())
		}
		if r.inline.result != nil {
			return effects{} // past num: not needed
		}
		return r.leaveInline()
	}
	var fx effects
	r.watch(s.node, &fx) // a backup's node matters too: it may replace a failed one
	if r.sliced != nil {
		fx.merge(r.sliced.arrived())
		return fx
	}
	r.tree.arrive(id, &fx)
	return fx
}

// choosePlan fixes the tree once S is known (at the first arrival, which
// came with its bytes if withBytes).
func (r *Reduction) choosePlan(withBytes bool) (effects, bool) {
	n := int(r.req.GetNumObjects())
	nl, nb := -1, -1
	if e := r.cfg.Estimator; e != nil {
		// The estimate as of now, not of the Reduce call: the sources'
		// Puts may have measured since.
		r.L, r.B, nl, nb = e.Estimate()
	}
	r.plan = &messages.ReducePlan{LatencyNs: int64(r.L), Bandwidth: r.B, ObjectSize: r.size,
		LatencySamples: int64(nl), BandwidthSamples: int64(nb)}
	if r.size < r.cfg.InlineLimit && withBytes {
		r.inline = newInlineRun(r.core)
		r.plan.Shape = ShapeInline
		return effects{}, true
	}
	return r.streamedPlan(n)
}

// streamedPlan fixes a plan that streams the sources from their copies:
// sliced, or a tree.
func (r *Reduction) streamedPlan(n int) (effects, bool) {
	if r.chooseSliced(n) {
		return effects{}, true
	}
	t, err := newTreeRun(r.core, n, 0)
	if err != nil {
		return r.fail(messages.Errorf(messages.ErrorCode_INTERNAL, "reduce: tree: %v", err)), false
	}
	r.tree = t
	return effects{}, true
}

// leaveInline is the arrival of a source under the inline limit without
// its bytes, before the inline run reduced: its directory shard was
// rebuilt from the store nodes' republications, which name the copies
// but carry no bytes. The sources are then streamed from their copies,
// as larger ones are, and those that arrived so far are placed in their
// order.
func (r *Reduction) leaveInline() effects {
	r.inline = nil
	fx, ok := r.streamedPlan(int(r.req.GetNumObjects()))
	if !ok {
		return fx
	}
	for _, id := range r.arrivals {
		r.watch(r.sources[id].node, &fx)
		if r.sliced != nil {
			fx.merge(r.sliced.arrived())
		} else {
			r.tree.arrive(id, &fx)
		}
	}
	return fx
}

// chooseSliced decides, once S is known, whether an AllReduce of n
// sources is sliced (see slicedRun), and reports both shapes' modelled
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
	c := plan.ChooseAllReduceShaped(n, r.L, r.B, r.cfg.Shaper, r.size, width, n, r.cfg.Paced)
	if r.B > 0 {
		r.plan.ShapeCosts = []*messages.ShapeCost{{Shape: ShapeSliced, CostUs: c.SlicedCost.Microseconds()},
			{Shape: ShapeDAry, CostUs: c.ReduceBroadcastCost.Microseconds()}}
	}
	if !forced && (!c.Sliced || r.size/int64(n) < r.cfg.MinSlice) {
		return false
	}
	r.sliced = newSliced(r.core, n, cut)
	r.sliced.fillPlan()
	return true
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
	listed := map[string]bool{} // a source named twice is waited for once
	for _, id := range r.req.GetSourceIds() {
		held := r.sources[id] != nil || r.knee != nil && r.knee.holds(id)
		if !held && !listed[id] {
			listed[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}
