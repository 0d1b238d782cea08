package actorutil

import (
	"context"
	"errors"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// Request sends msg to pid and waits for the reply until ctx ends. It
// watches pid while it waits: an actor that stops before answering (a
// directory shard on a node that was killed, a store node that left)
// fails the request at once with UNAVAILABLE. (An unwatched future would
// wait for its whole deadline, since a stopped actor's mailbox is dropped
// without a reply; the caller would hang although it could have retried
// at the shard's new home at once.)
func Request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (any, error) {
	return RequestOrAbandon(ctx, root, pid, msg, nil)
}

// RequestOrAbandon is Request; if ctx ends before the reply, abandon (when
// set) is called with the PID the reply was to go to, so that the caller
// can withdraw exactly this request where pid keeps requests waiting (a
// directory shard parks a Locate until the object exists).
func RequestOrAbandon(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, abandon func(replyTo *actor.PID)) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "request without a deadline")
	}
	if ctx.Err() != nil {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the request was sent")
	}
	if pid == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no actor to send %T to", msg)
	}
	deadline, _ := ctx.Deadline()
	system := root.ActorSystem()
	// A future, not an actor, waits for the reply: it needs no mailbox,
	// no goroutine and no Started/Stop round, which a request pays on
	// every hop of a small Get. It also watches the target: the
	// Terminated that a stopped target sends its watchers resolves it.
	f := actor.NewFuture(system, time.Until(deadline))
	done := make(chan requestResult, 1)
	f.ContinueWith(func(res any, err error) { done <- requestResult{res, err} })
	target, _ := system.ProcessRegistry.Get(pid)
	target.SendSystemMessage(pid, &actor.Watch{Watcher: f.PID()})
	root.RequestWithCustomSender(pid, msg, f.PID())
	var r requestResult
	select {
	case r = <-done:
	case <-ctx.Done():
		select {
		case r = <-done: // a reply that came with the deadline still counts
		default:
			root.Stop(f.PID()) // resolves it; a late reply is dropped
			if abandon != nil {
				abandon(f.PID())
			}
		}
	}
	target.SendSystemMessage(pid, &actor.Unwatch{Watcher: f.PID()})
	if ctx.Err() != nil && r.v == nil && r.err == nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
		}
		return nil, messages.AsError(ctx.Err())
	}
	switch m := r.v.(type) {
	case *actor.Terminated:
		if pid.Equal(m.GetWho()) {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s stopped before it answered (its node failed, left or stopped)", pid.GetId())
		}
	}
	switch {
	case errors.Is(r.err, actor.ErrDeadLetter):
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s is not running", pid.GetId())
	case errors.Is(r.err, actor.ErrTimeout):
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
	case r.err != nil:
		return nil, messages.AsError(r.err)
	}
	return r.v, nil
}

type requestResult struct {
	v   any
	err error
}

// TimeoutMs is the time left before ctx's deadline in whole milliseconds
// (at least 1), for the timeout_ms fields of requests; 0 without one.
func TimeoutMs(ctx context.Context) int64 {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(1, time.Until(deadline).Milliseconds())
}
