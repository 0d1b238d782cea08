package actorutil

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// Request sends msg to pid and waits for the reply until ctx ends. It
// watches pid while it waits: an actor that stops before answering (a
// directory shard on a node that was killed, a store node that left)
// fails the request at once with UNAVAILABLE. (A plain future would wait
// for its whole deadline, since a stopped actor's mailbox is dropped
// without a reply; the caller would hang although it could have retried
// at the shard's new home at once.)
func Request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "request without a deadline")
	}
	if ctx.Err() != nil {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the request was sent")
	}
	if pid == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no actor to send %T to", msg)
	}
	done := make(chan requestResult, 1)
	asker := root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &watchedRequest{target: pid, msg: msg, done: done}
	}))
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		root.Send(asker, giveUp{})
		if ctx.Err() == context.DeadlineExceeded {
			return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
		}
		return nil, messages.AsError(ctx.Err())
	}
}

type requestResult struct {
	v   any
	err error
}

// giveUp ends a watchedRequest whose caller stopped waiting.
type giveUp struct{}

// watchedRequest is the short-lived actor behind request: it watches the
// target, sends the request, and reports the first of the reply and the
// target's termination.
type watchedRequest struct {
	target *actor.PID
	msg    any
	done   chan<- requestResult
	over   bool
}

func (w *watchedRequest) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Watch(w.target)
		ctx.Request(w.target, w.msg)
	case *actor.Stopping, *actor.Stopped, *actor.Restarting, *actor.ReceiveTimeout:
	case *actor.Terminated:
		if w.target.Equal(m.GetWho()) {
			w.finish(ctx, requestResult{err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s stopped before it answered (its node failed, left or stopped)", w.target.GetId())})
		}
	case *actor.DeadLetterResponse:
		w.finish(ctx, requestResult{err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s is not running", w.target.GetId())})
	case giveUp:
		w.finish(ctx, requestResult{})
	default:
		w.finish(ctx, requestResult{v: m})
	}
}

func (w *watchedRequest) finish(ctx actor.Context, r requestResult) {
	if w.over {
		return
	}
	w.over = true
	w.done <- r // buffered; read at most once
	ctx.Unwatch(w.target)
	ctx.Stop(ctx.Self())
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
