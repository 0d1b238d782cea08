package reduction

import (
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// How a Reduction ends: its answer once n sources are reduced and the
// participants that live hold the result, or a failure (the deadline, a
// deleted or lost source it cannot do without, a failed position) that
// releases every node and the target.

func (r *core) maybeFinish() effects {
	if r.reply == nil || len(r.fetching) > 0 {
		return effects{}
	}
	r.over = true
	return effects{Reply: r.reply, Release: r.releaseNodes(), ReleaseKeep: true}
}

// expire fails the Reduction if its deadline has passed.
func (r *Reduction) expire(now time.Time) effects {
	if r.over || now.Before(r.deadline) {
		return effects{}
	}
	if r.gating() {
		return r.fail(messages.Errorf(messages.ErrorCode_TIMEOUT,
			"reduce: knee policy: %d of %d sources arrived before the deadline and no knee was accepted (%d needed by min_percent)",
			r.knee.gate.Arrived(), len(r.req.GetSourceIds()), r.knee.gate.Needed()))
	}
	n := int(r.req.GetNumObjects())
	if held := len(r.sources); held < n {
		return r.fail(messages.Errorf(messages.ErrorCode_TIMEOUT,
			"reduce: only %d of the %d sources needed were available before the deadline; missing: %s", held, n, strings.Join(r.Waiting(), ", ")))
	}
	if r.reply != nil {
		return r.failKeeping(messages.Errorf(messages.ErrorCode_TIMEOUT,
			"allreduce: %d participants did not get the result before the deadline (the target holds it)", len(r.fetching)))
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

// abortForRetry ends the Reduction because its coordinator stops with
// its directory shard (moved to another member, or restarted): the
// caller's node starts the call again at the shard's home. Before the
// result is fixed that is abort. Once it is (the root's or the gathers'
// commit, or the inline result's store, went out with the publication
// that ends the reservation; an AllReduce then still waits for its
// participants' Gets), the target is the call's result: readers may hold
// it whole, and the next attempt answers with it (the rebuilt shard
// learns it from the republished copies, see directory's Reserve). So
// the answer is err, and every node is released keeping the target: no
// ReleaseTarget, no drop. Released as a failure's, every copy went, and
// the next attempt reduced again, perhaps other sources of an n-of-m,
// while a Get had returned this result (chaos seed 78 under load).
func (r *Reduction) abortForRetry(err *messages.Error) effects {
	if r.over {
		return effects{}
	}
	return r.failKeeping(err)
}

// failKeeping ends the Reduction with err; once its result is fixed
// (committed), it keeps the target, as abortForRetry does: the answer is
// err, and every node is released keeping it. An AllReduce waiting for
// its participants' Gets of a committed result fails so when one of them
// cannot hold a copy (CAPACITY) or its deadline passes. Released as a
// failure's, the target went after a Get had returned it whole, and a
// Get that began later waited for it until its deadline (chaos seed
// 5000288).
func (r *Reduction) failKeeping(err *messages.Error) effects {
	if r.reply == nil {
		return r.fail(err)
	}
	r.over = true
	return effects{Reply: &messages.ReduceReply{TargetId: r.req.GetTargetId(), Error: err, Plan: r.plan},
		Release: r.releaseNodes(), ReleaseKeep: true}
}

func (r *core) success(reduced []string) *messages.ReduceReply {
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

// fail ends the Reduction with err, in the shape that runs.
func (r *Reduction) fail(err *messages.Error) effects {
	if r.sliced != nil {
		return r.sliced.fail(err)
	}
	return r.core.fail(err)
}

// fail ends the Reduce with err: every node with a task and the target
// are released.
func (r *core) fail(err *messages.Error) effects {
	r.over = true
	return effects{Reply: &messages.ReduceReply{TargetId: r.req.GetTargetId(), Error: err, Plan: r.plan},
		Release: r.releaseNodes(), ReleaseTarget: true}
}

// targetNotCreated marks fx, the failure of a Reduction whose target's
// creation at its directory shard answered UNAVAILABLE (the tree root's,
// a sliced AllReduce's creator gather's, the inline result's store), as
// a shard move: the shard that reserved the target is not the one the
// creator's member asked (the shard moved or restarted since the
// reservation, and its new home holds none; see directory's
// refuseCreate), or it stopped. As for a coordinator that stops with its
// shard, the answer says so (ReduceReply.shard_stopped), and the
// caller's node starts the Reduce again at the shard's home. Only before
// the result was fixed: nothing of this attempt is readable then.
func (r *core) targetNotCreated(fx effects) effects {
	if r.reply == nil && fx.Reply != nil {
		fx.Reply.ShardStopped = true
	}
	return fx
}

// bystanders are the live nodes of the arrived sources that ran no task
// (not in released), in node id order.
func (r *core) bystanders(released []*messages.NodeRef) []*messages.NodeRef {
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

func (r *core) releaseNodes() []*messages.NodeRef {
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
