package coordinator

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// Under a knee policy the Reduction gates before it plans: arrivals wait
// in pending, in order, while a KneeGate decides how many to reduce; once
// it fixes the count, the tree is planned from what arrived.

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
