package storenode

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// request sends msg to pid and waits for the reply until ctx ends. The
// future's own timeout is the context's deadline, so the goroutine that
// waits on it never outlives the caller's deadline.
func request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (any, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "request without a deadline")
	}
	d := time.Until(deadline)
	if d <= 0 {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the request was sent")
	}
	f := root.RequestFuture(pid, msg, d)
	type result struct {
		v   any
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f.Result()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			if errors.Is(r.err, actor.ErrTimeout) {
				return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
			}
			if errors.Is(r.err, actor.ErrDeadLetter) {
				return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s is not running", pid.GetId())
			}
			return nil, messages.AsError(r.err)
		}
		return r.v, nil
	case <-ctx.Done():
		return nil, messages.AsError(ctx.Err())
	}
}

// timeoutMs is the remaining time of ctx in whole milliseconds (at least 1).
func timeoutMs(ctx context.Context) int64 {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(1, time.Until(deadline).Milliseconds())
}
