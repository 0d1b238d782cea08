package reduction

import (
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Under a knee policy the Reduction gates before it plans: arrivals wait
// in pending, in order, while a KneeGate decides how many to reduce; once
// it fixes the count, the phase ends and what arrived is placed, in
// arrival order, as any arrival is: the shape is chosen then.

// kneePhase is the state of a knee policy's gate, from the Reduce's
// start until the gate fixes the count.
type kneePhase struct {
	*core

	gate *KneeGate
	err  error // an invalid knee policy (gate nil): Begin fails the Reduce
	// pending are the arrivals still available, in arrival order; their
	// locations are placed once the count is fixed.
	pending []*messages.LocationUpdate
	deleted []string // sources deleted while gating, in order
}

// newKneePhase returns the phase of req's knee policy.
func newKneePhase(c *core, req *messages.Reduce) *kneePhase {
	k := &kneePhase{core: c}
	k.gate, k.err = NewKneeGate(req)
	return k
}

// gating reports whether a knee policy has not fixed the count yet.
func (r *Reduction) gating() bool { return r.knee != nil && r.knee.gate != nil && !r.over }

// Gating reports whether a knee policy has not fixed the count yet (the
// Reduction has no tree and counts arrivals).
func (r *Reduction) Gating() bool { return r.gating() }

// arrive records a source's location while the gate decides the count.
func (r *Reduction) arrive(u *messages.LocationUpdate, now time.Time) effects {
	fx, num, counted := r.knee.arrive(u, now)
	if counted {
		r.gateStep(num, now, &fx)
	}
	return fx
}

// arrive records u while the gate decides the count, and reports whether
// it was a new arrival the gate counted, with the number to reduce if
// that fixed it (0 before).
func (k *kneePhase) arrive(u *messages.LocationUpdate, now time.Time) (effects, int, bool) {
	var fx effects
	id := u.GetObjectId()
	if u.GetDeleted() {
		if !slices.Contains(k.deleted, id) {
			k.deleted = append(k.deleted, id)
		}
		k.pending = slices.DeleteFunc(k.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id })
		if left := len(k.req.GetSourceIds()) - len(k.deleted); left < k.gate.Needed() {
			return k.fail(messages.Errorf(messages.ErrorCode_DELETED,
				"reduce: source %q was deleted; %d sources remain, min_percent needs %d", id, left, k.gate.Needed())), 0, false
		}
		return fx, 0, false
	}
	if u.GetError() != nil {
		// No copy is left (LOST): like a failed node's arrival, it is no
		// longer available (the gate still counts it: it did arrive).
		k.pending = slices.DeleteFunc(k.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id })
		return fx, 0, false
	}
	if u.GetNode() == nil {
		return fx, 0, false
	}
	if u.GetState() == messages.LocationState_LOCATION_STATE_UNSPECIFIED {
		// The copy left the directory (evicted, or a partial copy whose
		// feed died): like a failed node's, it is no longer available.
		k.pending = slices.DeleteFunc(k.pending, func(p *messages.LocationUpdate) bool {
			return p.GetObjectId() == id && p.GetNode().GetNodeId() == u.GetNode().GetNodeId()
		})
		return fx, 0, false
	}
	if i := slices.IndexFunc(k.pending, func(p *messages.LocationUpdate) bool { return p.GetObjectId() == id }); i >= 0 {
		if p := k.pending[i]; p.GetNode().GetNodeId() == u.GetNode().GetNodeId() && u.GetState() == messages.LocationState_COMPLETE {
			k.pending[i] = u // its Put finished: the tree may stream it as whole
		}
		return fx, 0, false
	}
	k.watch(u.GetNode(), &fx) // its node may die before the count is fixed
	k.pending = append(k.pending, u)
	return fx, k.gate.Arrive(id, now), true
}

// nodeFailed: an arrival whose copy died no longer counts as available
// (the gate still counts it: it did arrive).
func (k *kneePhase) nodeFailed(node string) {
	k.pending = slices.DeleteFunc(k.pending, func(u *messages.LocationUpdate) bool { return u.GetNode().GetNodeId() == node })
}

// holds reports whether a location of id waits in pending.
func (k *kneePhase) holds(id string) bool {
	return slices.ContainsFunc(k.pending, func(u *messages.LocationUpdate) bool { return u.GetObjectId() == id })
}

// gateStep ends the phase once the gate fixed the count (num > 0): the
// request says num, and what arrived is placed, in arrival order, as
// any arrival is. Before, it arms the timer for the gate's next
// deadline.
func (r *Reduction) gateStep(num int, now time.Time, fx *effects) {
	k := r.knee
	if num == 0 {
		if at := k.gate.NextDeadline(); !at.IsZero() {
			if !at.After(now) {
				// The gate did not fire at its own deadline: ask again a
				// little later rather than at once, forever.
				at = now.Add(time.Millisecond)
			}
			fx.kneeAt = at
		}
		return
	}
	r.setNum(num)
	fx.knee = &KneeFixed{Arrived: k.gate.Arrived(), Count: num, Reason: k.gate.Reason(), After: now.Sub(r.begun)}
	r.completedBy = k.gate.Reason()
	r.knee = nil
	for _, u := range k.pending {
		fx.merge(r.located(u, now))
	}
	for _, id := range k.deleted {
		fx.merge(r.located(&messages.LocationUpdate{ObjectId: id, Deleted: true}, now))
	}
}
