package reduction

import (
	"slices"
	"strings"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// An AllReduce lowers n to what can still come when sources are lost,
// so that every survivor gets the exact reduction of the surviving
// sources, named in the reply, instead of a hang until the deadline. A
// source is lost only when no complete copy of it is left: the directory
// says so (LocationUpdate.error LOST, for a source it located before or
// not). The failure of a participant's node takes that node's copy, not
// the source: another member may hold a whole copy (a reader's, which a
// Get made), and the fault model lets an AllReduce reduce fewer than n
// only for sources with no copy left. Such a source leaves the run, is
// asked for again at once, and takes part from the copy the shard
// offers; if that was its last copy, the shard's LOST follows. Lowering
// n happens at every loss that leaves fewer possible sources than n, not
// only at the first: a source counts as possible while it is not deleted
// and not lost (and a new copy of a lost one makes it possible again).

// allReduceNodeFailed handles the failure of node in a running
// AllReduce (sliced or tree) and reports whether it did. The sources
// whose copies the run took from node leave it (see above) and are
// asked for again; n stays. A sliced run whose chains started cannot go
// on without them and re-plans as a tree of n (see replan); before the
// chains, it waits for their new copies. A tree repairs their positions
// itself (treeRun.nodeFailed: it reports false for that).
func (r *Reduction) allReduceNodeFailed(node string, fx *effects) bool {
	var left []string
	for _, id := range r.req.GetSourceIds() {
		if src := r.sources[id]; src != nil && src.node.GetNodeId() == node {
			left = append(left, id)
		}
	}
	if len(left) == 0 {
		return r.sliced != nil // a sliced run needs nothing from a node without sources
	}
	fx.Subscribe = append(fx.Subscribe, left...)
	switch {
	case r.sliced == nil:
		return false
	case r.sliced.running:
		fx.merge(r.replan(node, true, left, int(r.req.GetNumObjects())))
	default:
		for _, id := range left {
			delete(r.sources, id)
		}
		r.arrivals = slices.DeleteFunc(r.arrivals, func(a string) bool { return r.sources[a] == nil })
	}
	return true
}

// allReduceLost marks sources of a running AllReduce lost, with node
// (their copies' node; "" for a source the directory reported lost
// before it was ever located), and
// reports whether it handled that: whether it re-planned the run with n
// lowered (or failed it), because fewer than n sources are still
// possible or a sliced run lost one. Otherwise a tree repairs a lost
// source's position with a backup or a late arrival.
func (r *Reduction) allReduceLost(node string, lost []string, fx *effects) bool {
	for _, id := range lost {
		r.lost[id] = true
	}
	num := min(int(r.req.GetNumObjects()), r.possible())
	if r.sliced == nil && num == int(r.req.GetNumObjects()) {
		// The tree repairs with a backup or a late arrival (and a source
		// reported lost again changes nothing). A sliced run reduces
		// every source: it cannot lose one without lowering n.
		return false
	}
	fx.merge(r.replan(node, true, lost, num))
	return true
}

// slicedSourceGone handles a running sliced AllReduce whose copy of
// source id on node is gone while node lives: evicted to make room, or
// dropped, after the directory located it there. Its chain position
// found it missing (NOT_FOUND), or the directory said the copy left. As
// for the failure of node, for that source alone: the source is asked
// for again, and the run, which cannot place a source again, re-plans as
// a tree of n that takes it from the copy the shard offers (or lowers n
// on the shard's LOST). It failed the AllReduce NOT_FOUND for a source
// that still existed (chaos seed 5001140: a reader's copy, evicted on a
// full node between the Locate and the chain's open).
func (r *Reduction) slicedSourceGone(id, node string) effects {
	fx := effects{Subscribe: []string{id}}
	fx.merge(r.replan(node, false, []string{id}, int(r.req.GetNumObjects())))
	return fx
}

// replan replaces the AllReduce's run, whose sources in lost left it
// with node (their copies there went with it: down when node failed), or
// were reported lost by the directory (node "" if none of them was ever
// located), by
// a d-ary tree (the reduce-then-broadcast shape) of num positions: the
// sources that survive, placed in their arrival order, plus any still to
// arrive; a lost source that is created again is a backup that takes a
// position only if one is still open, or a failure makes one. That tree
// has late arrivals, backups and repairs, and its reply names exactly the
// sources its root reduced.
//
// The old run's workers stop and their outputs go: every surviving node
// (node too, unless it is down) with a worker gets a release (which makes its workers say nothing
// more), and every node that may hold a copy of the target (a sliced
// run's gathers, a tree's root) a drop, all sent before the new tasks, so
// that a new root on that node creates the target afresh. Reports of the
// old run may still be on their way; the new tree's generations all come
// after every generation the old run used (staleGen), so those reports
// are ignored, the new outputs have new names (InternalID), and the
// directory takes the new root's target as a newer generation, dropping
// any copy it still lists. The work the old run did is lost: a tree that
// shrinks keeps none of its positions' outputs.
func (r *Reduction) replan(node string, down bool, lost []string, num int) effects {
	if num < 1 {
		if node == "" {
			return r.fail(messages.Errorf(messages.ErrorCode_LOST,
				"allreduce: sources %s were lost (no copy left): no source is left to reduce", strings.Join(lost, ", ")))
		}
		return r.fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"allreduce: participant %s failed with sources %s: no source is left to reduce", node, strings.Join(lost, ", ")))
	}
	var fx effects
	if r.size < 0 {
		// Nothing arrived yet (sources reported lost before any was
		// located), so nothing ran and no shape was chosen: the first
		// arrival plans for num, as a tree (a sliced run reduces every
		// source).
		fx.Events = append(fx.Events, &events.AllReduceReplanned{Reduce: r.id, Node: node, Lost: slices.Clone(lost), Num: num})
		r.setNum(num)
		return fx
	}
	for _, id := range lost {
		delete(r.sources, id) // it may arrive again, from a new copy
	}
	// Sources a tree lost before (repaired with a backup) are gone too,
	// and one that arrived again is listed once.
	seen := map[string]bool{}
	r.arrivals = slices.DeleteFunc(r.arrivals, func(a string) bool {
		drop := r.sources[a] == nil || seen[a]
		seen[a] = true
		return drop
	})
	ran := false
	switch {
	case r.sliced != nil && r.sliced.running:
		ran = true
		for _, n := range r.sliced.copies() {
			if !down || n.GetNodeId() != node {
				fx.Drop = append(fx.Drop, n)
			}
		}
	case r.tree != nil:
		t := r.tree
		if root := t.rootAt[t.gen[t.tree.Root()]]; root != "" && (!down || root != node) && r.nodes[root] != nil {
			fx.Drop = append(fx.Drop, r.nodes[root])
		}
		ran = len(r.nodes) > 0
	}
	stale := 0
	if r.tree != nil {
		stale = r.tree.lastGen()
	}
	if r.sliced != nil && r.sliced.anySent() {
		stale = max(stale, 1) // every task of a sliced run is generation 1's
	}
	if ran {
		for _, n := range r.releaseNodes() {
			if !down || n.GetNodeId() != node {
				fx.Abandon = append(fx.Abandon, n)
			}
		}
	}
	fx.Events = append(fx.Events, &events.AllReduceReplanned{Reduce: r.id, Node: node, Lost: slices.Clone(lost), Num: num,
		From: r.plan.GetShape()})
	r.setNum(num)
	r.sliced, r.tree = nil, nil
	// The plan is the new tree's; the shapes' prices stay, as what the
	// model chose from.
	old := r.plan
	r.plan = &messages.ReducePlan{LatencyNs: old.GetLatencyNs(), Bandwidth: old.GetBandwidth(), ObjectSize: old.GetObjectSize(),
		LatencySamples: old.GetLatencySamples(), BandwidthSamples: old.GetBandwidthSamples(), ShapeCosts: old.GetShapeCosts()}
	t, err := newTreeRun(r.core, num, stale)
	if err != nil {
		fx.merge(r.fail(messages.Errorf(messages.ErrorCode_INTERNAL, "allreduce: re-planned tree: %v", err)))
		return fx
	}
	r.tree = t
	for _, id := range slices.Clone(r.arrivals) {
		t.arrive(id, &fx)
	}
	return fx
}
