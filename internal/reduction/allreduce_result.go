package reduction

import (
	"github.com/hoplite-go/hoplite/messages"
)

// An AllReduce's result reaches its participants: each is asked once to
// Get it (pushed with its bytes when the sources were inline), from the
// root's first chunk on, and the Reduce answers once every participant
// that lives has it.

// askEach asks every node of nodes not asked yet to Get the result, and
// watches it: a participant that dies will never answer.
func (r *core) askEach(nodes []*messages.NodeRef, fx *effects) {
	for _, n := range nodes {
		r.askFetch(n, fx)
	}
}

// askFetch sends node its Get of the result, once.
func (r *core) askFetch(n *messages.NodeRef, fx *effects) {
	if id := n.GetNodeId(); !r.asked[id] {
		r.asked[id] = true
		r.fetching[id] = true
		r.watch(n, fx)
		fx.Fetch = append(fx.Fetch, n)
	}
}

// pinned says whether node's pushed copy is pinned: the caller's node's.
func (r *core) pinned(node string) bool {
	return r.start != nil && r.start.GetNodeId() == node
}

// nodesOf are the nodes of the sources ids, each once and none in seen,
// in the order of ids.
func (r *core) nodesOf(ids []string, seen map[string]bool) []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, id := range ids {
		n := r.sources[id].node
		if !seen[n.GetNodeId()] {
			seen[n.GetNodeId()] = true
			out = append(out, n)
		}
	}
	return out
}

// fetched handles the end of one Get of the result on node: an
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
		return r.failKeeping(messages.Errorf(messages.AsError(err).GetCode(), "%s: %s could not fetch the result: %v", what, node, err))
	}
	delete(r.fetching, node)
	fx := r.maybeFinish()
	if r.inline != nil {
		r.inline.pushed(node, &fx)
	}
	return fx
}
