package reduction

import (
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Begin starts the Reduction: watch the caller's node, subscribe to
// every source, and arm the deadline and the resubscribe timer.
type Begin struct{}

// NodeFailed: the store node named Node failed. The shape that runs
// repairs or re-plans around the sources it held; while a knee policy
// gates, the arrivals on that node no longer count as available.
type NodeFailed struct{ Node string }

// Fetched: one Get of the result on Node ended with Err (nil: it has
// the result): an AllReduce participant's, or a push of an inline
// result.
type Fetched struct {
	Node string
	Err  error
}

// Abort fails the Reduction from outside (its actor is stopping).
type Abort struct{ Err *messages.Error }

// AbortForRetry ends the Reduction with Err because its coordinator
// stops with its directory shard, and the caller's node starts the call
// again at the shard's home: as Abort until the result is fixed, and
// after that a result committed, kept for the next attempt to answer
// with (see abortForRetry).
type AbortForRetry struct{ Err *messages.Error }

// Cancel ends the Reduction because its caller gave up
// (messages.CancelReduce). Before its commit began it fails CANCELED
// the way any failure does: every node with a task is released and the
// target is dropped wherever it was written, so nothing of the run
// stays readable or reserved. Once the commit began (a tree root's or
// the gathers' ReduceCommit, or the inline result's store, went out)
// the result is fixed and may be read whole already: the cancel changes
// nothing, and the answer is the commit's.
type Cancel struct{}

// Step applies one event at now: Begin; a source's
// *messages.LocationUpdate; a position's *messages.ReduceTaskStarted or
// *messages.ReduceTaskDone; the caller's *messages.StoreReducedReply;
// NodeFailed, Fetched, Abort, AbortForRetry or Cancel; or one of its
// own timers coming back (DeadlineTimer, KneeTimer, ResubscribeTimer).
// Any other event asks for nothing.
func (r *Reduction) Step(now time.Time, ev any) Effects {
	switch e := ev.(type) {
	case Begin:
		return r.beginStep(now)
	case *messages.LocationUpdate:
		if e.GetEnded() {
			r.endedOne(e.GetObjectId()) // whatever the update says besides
		}
		return r.out(r.located(e, now), now)
	case *messages.ReduceTaskStarted:
		return r.started(e, now)
	case *messages.ReduceTaskDone:
		return r.done(e, now)
	case *messages.StoreReducedReply:
		return r.stored(e, now)
	case NodeFailed:
		return r.out(r.nodeFailed(e.Node), now)
	case Fetched:
		return r.out(r.fetched(e.Node, e.Err), now)
	case Abort:
		return r.out(r.abort(e.Err), now)
	case AbortForRetry:
		return r.out(r.abortForRetry(e.Err), now)
	case Cancel:
		return r.cancel(now)
	case DeadlineTimer:
		return r.expireStep(now)
	case KneeTimer:
		return r.kneeCheck(now)
	case ResubscribeTimer:
		return r.resubscribe(now)
	}
	return Effects{}
}
