package reduction

import (
	"strings"

	"github.com/hoplite-go/hoplite/messages"
)

// A source that goes: its node failed, the directory reported it lost,
// or it was deleted. Each shape takes it its own way: a knee policy's
// gate stops counting it as available, a tree repairs its position with
// a backup, an AllReduce that cannot make up n without it re-plans
// (allreduce_replan.go), and a Reduce that cannot do without it fails.

// nodeFailed handles the failure of node. Its participant's Get of an
// AllReduce's result is no longer waited for; the caller's node failing
// fails the Reduce; an AllReduce that cannot make up n without the
// sources it held re-plans (allReduceNodeFailed); while a knee policy
// gates, its arrivals no longer count as available; and a tree repairs
// each position it held (treeRun.nodeFailed). Inline sources live in
// the directory, not on the node.
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
	if r.req.GetAllReduce() && !r.gating() && r.inline == nil && (r.sliced != nil || r.tree != nil) && r.allReduceNodeFailed(node, &fx) {
		return fx
	}
	if r.gating() {
		r.knee.nodeFailed(node)
		return fx
	}
	if r.inline != nil || r.tree == nil {
		return fx // small sources live in the directory, not on the node
	}
	r.tree.nodeFailed(node, &fx)
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
	if r.inline != nil {
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
		r.tree.sourceGone(id, &fx)
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

// sourceDeleted handles the deletion of source id.
func (r *Reduction) sourceDeleted(id string) effects {
	r.gone[id] = true
	if r.sliced != nil {
		// A sliced AllReduce reduces every source.
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED, "allreduce: source %q was deleted during the AllReduce", id))
	}
	used := r.sources[id] != nil && (r.inline != nil && r.sources[id].arrival < int(r.req.GetNumObjects()) ||
		r.tree != nil && r.tree.assign.Position(id) >= 0)
	if used {
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED, "reduce: source %q was deleted during the Reduce", id))
	}
	var fx effects
	if r.sources[id] != nil && r.tree != nil {
		// A backup whose bytes are gone must not take the place of a
		// failed position (the knee simulation's seed 2163 reduced one).
		r.tree.sourceGone(id, &fx)
	}
	if possible := r.possible(); possible < int(r.req.GetNumObjects()) {
		return r.fail(messages.Errorf(messages.ErrorCode_DELETED,
			"reduce: source %q was deleted; %d sources remain for num_objects %d", id, possible, r.req.GetNumObjects()))
	}
	return fx
}
