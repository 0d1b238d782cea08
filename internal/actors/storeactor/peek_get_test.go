package storeactor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A Get sent to the node as a message (an application actor's) peeks
// first: a shard that serves the bytes from its index answers it, the
// node keeps no copy and asks for none; a prefetch, whose point is the
// copy, does not peek; a peek that finds nothing goes on to the Locate
// for a copy.
func TestActorGetPeeksFirst(t *testing.T) {
	var peeks, full atomic.Int32
	serve := atomic.Bool{}
	serve.Store(true)
	system, node, store, _ := fastNodePeeking(t, func(_ context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if l.GetInlineOnly() {
			peeks.Add(1)
			if !serve.Load() {
				return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt()}, nil
			}
			return inlineAnswer(l), nil
		}
		full.Add(1)
		return inlineAnswer(l), nil
	}, func(actor.Context) {})
	get := func(m *messages.Get) *messages.GetReply {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := actorutil.Request(ctx, system.Root, node, m)
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.GetReply)
	}
	if r := get(&messages.Get{ObjectId: "x", TimeoutMs: 5000}); r.GetError() != nil || string(r.GetData()) != "inline bytes" {
		t.Fatalf("Get: %q, %v", r.GetData(), r.GetError())
	}
	syncNode(t, system, node)
	if peeks.Load() != 1 || full.Load() != 0 || store.Lookup("x") != nil {
		t.Fatalf("%d peeks, %d Locates for a copy, copy %v: want the peek alone and no copy", peeks.Load(), full.Load(), store.Lookup("x"))
	}
	if r := get(&messages.Get{ObjectId: "y", TimeoutMs: 5000, Prefetch: true}); r.GetError() != nil {
		t.Fatalf("prefetch: %v", r.GetError())
	}
	if peeks.Load() != 1 || full.Load() != 1 || store.Lookup("y") == nil {
		t.Fatalf("prefetch: %d peeks, %d Locates for a copy, copy %v: want no peek and the copy", peeks.Load(), full.Load(), store.Lookup("y"))
	}
	serve.Store(false)
	if r := get(&messages.Get{ObjectId: "z", TimeoutMs: 5000, ReadOnly: true}); r.GetError() != nil || string(r.GetData()) != "inline bytes" {
		t.Fatalf("Get after a missed peek: %q, %v", r.GetData(), r.GetError())
	}
	if peeks.Load() != 2 || full.Load() != 2 || store.Lookup("z") == nil {
		t.Fatalf("missed peek: %d peeks, %d Locates for a copy, copy %v: want both and the copy", peeks.Load(), full.Load(), store.Lookup("z"))
	}
}

// A node that stops with a peek out answers its Get (undelivered, as
// the Gets it parks), whatever the peek's end.
func TestStoppingNodeAnswersAGetWhosePeekIsOut(t *testing.T) {
	release := make(chan struct{})
	peeking := make(chan struct{}, 1)
	system, node, _, _ := fastNodePeeking(t, func(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if l.GetInlineOnly() {
			peeking <- struct{}{}
			<-release
		}
		return inlineAnswer(l), nil
	}, func(actor.Context) {})
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f := system.Root.RequestFuture(node, &messages.Get{ObjectId: "x", TimeoutMs: 5000}, 10*time.Second)
	select {
	case <-peeking:
	case <-ctx.Done():
		t.Fatal("no peek")
	}
	system.Root.Stop(node)
	res, err := f.Result()
	if err != nil {
		t.Fatalf("no answer after the node stopped: %v", err)
	}
	if r := res.(*messages.GetReply); !errors.Is(r.GetError(), messages.ErrUnavailable) || r.GetError().GetUndeliveredTo() == "" {
		t.Fatalf("answer %v, want UNAVAILABLE, undelivered", r)
	}
}
