package storeactor

import (
	"sync"
	"sync/atomic"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// reduceCalls are the Reduces this node started for its callers and that
// have not answered yet, by requester and target: a caller that gives up
// sends CancelReduce naming its target from the PID its answer was to
// reach, and the cancel goes on to the target's shard with the call id
// only this node knows. They are shared with the goroutines that wait
// for the coordinators' answers, and outlive restarts of the actor as
// those goroutines do.
type reduceCalls struct {
	mu    sync.Mutex
	calls map[string]*reduceCall
}

// reduceCall is one Reduce waiting for its coordinator's answer.
type reduceCall struct {
	id string // StartReduce.call_id
	// canceled: its caller withdrew it. The wait goes on for the
	// coordinator's answer (CANCELED, or the commit's that began first),
	// which the caller waits a little for, but no new attempt starts.
	canceled atomic.Bool
}

func reduceCallKey(requester *actor.PID, target string) string {
	return actorutil.Key(requester) + "\x00" + target
}

// add records call for requester's Reduce into target, and returns the
// func that forgets it (only it: a later call under the same key is
// another's).
func (rc *reduceCalls) add(requester *actor.PID, target string, call *reduceCall) (done func()) {
	key := reduceCallKey(requester, target)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.calls == nil {
		rc.calls = map[string]*reduceCall{}
	}
	rc.calls[key] = call
	return func() {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if rc.calls[key] == call {
			delete(rc.calls, key)
		}
	}
}

// take removes and returns requester's call into target (nil: none is
// waiting; it answered, or it was never this node's).
func (rc *reduceCalls) take(requester *actor.PID, target string) *reduceCall {
	key := reduceCallKey(requester, target)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	call := rc.calls[key]
	delete(rc.calls, key)
	return call
}

// cancelReduce withdraws the Reduce its sender started into the target
// and has given up on: the target's shard hands the cancel to the call's
// coordinator, and this node starts no new attempt of it at the shard's
// next home. Nothing waits for the cancel to arrive (the coordinator may
// be gone): the caller hears the coordinator's answer if it comes within
// the caller's grace.
func (n *StoreNode) cancelReduce(ctx actor.Context, m *messages.CancelReduce) {
	if ctx.Sender() == nil {
		return
	}
	call := n.reduceCalls.take(ctx.Sender(), m.GetTargetId())
	if call == nil {
		return
	}
	call.canceled.Store(true)
	ctx.Send(n.cfg.ShardFor(m.GetTargetId()), &messages.CancelReduce{TargetId: m.GetTargetId(), CallId: call.id})
}
