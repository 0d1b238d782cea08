package coordinator

import (
	"slices"

	"github.com/hoplite-go/hoplite/coordinator/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

// Sources under the inline limit come with their bytes in their
// locations: the coordinator reduces them itself, without a tree, and
// the caller's node (an AllReduce's: this member's, see pushes) stores
// the result.

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
