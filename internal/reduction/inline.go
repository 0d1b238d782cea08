package reduction

import (
	"errors"
	"slices"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

// Sources under the inline limit come with their bytes in their
// locations: the coordinator reduces them itself, without a tree, and
// the caller's node (an AllReduce's: this member's, see pushes) stores
// the result.

// inlineRun is the state of a Reduce of inline sources.
type inlineRun struct {
	*core

	data map[string][]byte // each arrived source's bytes
	// result is the result once computed: an AllReduce pushes it with the
	// participants' Gets (messages.Get.pushed), and records each copy at
	// the target's shard when its node answers.
	result []byte
}

func newInlineRun(c *core) *inlineRun {
	return &inlineRun{core: c, data: map[string][]byte{}}
}

// arrived takes the bytes of source id, which has just arrived, and
// reduces once n have.
func (in *inlineRun) arrived(id string, data []byte) effects {
	in.data[id] = data
	n := int(in.req.GetNumObjects())
	if len(in.arrivals) != n {
		return effects{}
	}
	acc := append([]byte(nil), in.data[in.arrivals[0]]...)
	for _, id := range in.arrivals[1:n] {
		if err := kernel.Accumulate(in.req.GetOp(), in.req.GetDtype(), acc, in.data[id]); err != nil {
			return in.fail(messages.AsError(err))
		}
	}
	if acc == nil {
		acc = []byte{}
	}
	for i, id := range in.arrivals[:n] {
		in.plan.Positions = append(in.plan.Positions, &messages.ReducePosition{Position: int32(i), Parent: -1,
			ObjectId: id, NodeId: in.sources[id].node.GetNodeId(), Arrival: int32(i)})
	}
	in.result = acc
	return effects{StoreInline: &messages.StoreReduced{ReduceId: in.id, TargetId: in.req.GetTargetId(), Data: acc,
		ReducedIds: slices.Clone(in.arrivals[:n])}}
}

// stored handles the caller's answer to StoreInline.
func (in *inlineRun) stored(m *messages.StoreReducedReply) effects {
	if in.over || m.GetReduceId() != in.id {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		if errors.Is(err, messages.ErrUnavailable) {
			return in.targetNotCreated(in.fail(messages.AsError(err)))
		}
		return in.fail(messages.AsError(err))
	}
	in.reply = in.success(in.arrivals[:in.req.GetNumObjects()])
	var fx effects
	if in.pushes() && in.start != nil {
		// The caller's node first (once, if it is a participant too).
		in.askFetch(in.start, &fx)
	}
	if !in.req.GetAllReduce() {
		if len(fx.Fetch) == 0 {
			return in.maybeFinish()
		}
		return fx
	}
	// The node that stored the result answers its prefetch at once, so it
	// needs no special case.
	in.askEach(in.participants(), &fx)
	if len(fx.Fetch) == 0 {
		return in.maybeFinish()
	}
	return fx
}

// participants are the nodes of the reduced sources.
func (in *inlineRun) participants() []*messages.NodeRef {
	return in.nodesOf(in.arrivals[:min(len(in.arrivals), int(in.req.GetNumObjects()))], map[string]bool{})
}

// pushes says whether this Reduction, an AllReduce of inline sources,
// stores its result on its own member (TargetNode) and sends it with Gets
// (Get.pushed) to the participants and to the caller's node, pinned there
// as the caller's own copy. The participants then locate nothing, and the
// result's first copy costs no round trips between the caller's member
// and the coordinator's (a store, then its registration at the
// coordinator's shard), which the caller's push overlaps with the
// participants'. A plain Reduce still stores on the caller's node:
// pushing to it instead measured no faster, at more CPU.
func (in *inlineRun) pushes() bool {
	return in.req.GetAllReduce() && !in.cfg.NoInlinePush
}

// pushed records at the target's shard the copy that node's Get of a
// pushed result stored.
func (in *inlineRun) pushed(node string, fx *effects) {
	if !in.pushes() || in.result == nil {
		return
	}
	n := in.start
	if !in.pinned(node) {
		n = nil
		for _, p := range in.participants() {
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
		fx.Publish = append(fx.Publish, &messages.PublishLocation{ObjectId: in.req.GetTargetId(), Node: n,
			State: messages.LocationState_COMPLETE, Size: int64(len(in.result)), Fingerprint: fingerprint.Of(in.result),
			Creator: in.pinned(node)})
	}
}
