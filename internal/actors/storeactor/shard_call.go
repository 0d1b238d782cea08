package storeactor

import (
	"context"
	"errors"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// callBounded runs call on a goroutine of its own, bounded by deadline,
// and sends the node what it returns: a request to a shard on another
// member (the data plane's Creator or Deleter) that the node's actor
// must not wait for.
func callBounded(ctx actor.Context, deadline time.Time, call func(context.Context) any) {
	system, self := ctx.ActorSystem(), ctx.Self()
	go func() {
		cctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		system.Root.Send(self, call(cctx))
	}()
}

// shardCallError is the error of a call to the shard of id that failed
// with err: TIMEOUT when its deadline passed, else err as it is.
func shardCallError(err error, id string) *messages.Error {
	if errors.Is(err, context.DeadlineExceeded) {
		return messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from the directory shard of %q before the deadline", id)
	}
	return messages.AsError(err)
}
