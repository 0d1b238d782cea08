package actorutil

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// withdrawal tells a holder to answer the request it holds.
type withdrawal struct{}

// TestRequestGraceOrWithdraw: a cancel withdraws the request at once and
// returns the target's answer to the withdrawal if it comes within the
// grace, CANCELED if not; a deadline withdraws only once the grace for
// the target's own answer ran out.
func TestRequestGraceOrWithdraw(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	// holder keeps each request, and answers it when withdrawn (answers,
	// false: never).
	holder := func(answers bool) *actor.PID {
		var held *actor.PID
		return root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case echo:
				held = ctx.Sender()
			case withdrawal:
				if answers && held != nil {
					ctx.Send(held, echo{"withdrawn"})
				}
			}
		}))
	}
	call := func(ctx context.Context, pid *actor.PID, grace time.Duration) (any, int32, error) {
		var withdrawn atomic.Int32
		v, err := RequestGraceOrWithdraw(ctx, root, pid, echo{"x"}, grace, func(*actor.PID) {
			withdrawn.Add(1)
			root.Send(pid, withdrawal{})
		})
		return v, withdrawn.Load(), err
	}

	// Canceled: the holder's answer to the withdrawal is the result.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(20*time.Millisecond, cancel)
	v, n, err := call(ctx, holder(true), 10*time.Second)
	if err != nil || v != (echo{"withdrawn"}) || n != 1 {
		t.Fatalf("canceled, answered: %v, %v, withdrawn %d times; want the answer, withdrawn once", v, err, n)
	}

	// Canceled, no answer within the grace.
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(20*time.Millisecond, cancel)
	_, n, err = call(ctx, holder(false), 50*time.Millisecond)
	if !errors.Is(err, messages.ErrCanceled) || n != 1 {
		t.Fatalf("canceled, silent: %v, withdrawn %d times; want CANCELED, withdrawn once", err, n)
	}

	// The deadline: the withdrawal comes after the grace, so a target
	// answering at its deadline is heard first; a silent one is TIMEOUT.
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, n, err = call(ctx, holder(true), 30*time.Millisecond)
	if !errors.Is(err, messages.ErrTimeout) || n != 1 {
		t.Fatalf("deadline: %v, withdrawn %d times; want TIMEOUT, withdrawn once", err, n)
	}
}
