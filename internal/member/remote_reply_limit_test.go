// Built without the race detector only: these tests move more than 256
// MiB through a copy, which under it takes most of their half a minute
// (scripts/test runs them in its pass without -race).

//go:build !race

package member

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// A Get from another actor system of an object past what one remote
// message carries fails at once with INVALID_ARGUMENT naming the bound,
// rather than a reply dropped on its way leaving the requester to wait
// for its deadline. From an actor in the member's own system the same
// Get succeeds.
func TestGetPastTheRemoteMessageBoundIsRefused(t *testing.T) {
	l := start(t, Config{Nodes: 2, Capacity: 1 << 30})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte{7}, maxRemoteMessage+1)
	if err := l.Client(0).Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	replies := make(chan *messages.GetReply, 2)
	asker := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(l.StoreNode(0), &messages.Get{ObjectId: "big", ReadOnly: true, TimeoutMs: 30_000})
		case *messages.GetReply:
			replies <- m
		}
	})
	// From the application's system: one remote message each way.
	l.System().Root.Spawn(asker)
	select {
	case r := <-replies:
		err := r.GetError().Err()
		if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "remote message") {
			t.Fatalf("a Get of %d bytes from another actor system: %v, want INVALID_ARGUMENT naming the bound", len(big), err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Get past the remote message bound was not answered")
	}
	// From member 0's own system: a pointer hand-off, no bound.
	l.Member(0).Spawn(asker)
	select {
	case r := <-replies:
		if err := r.GetError().Err(); err != nil || len(r.GetData()) != len(big) {
			t.Fatalf("a Get from the member's own system: %v, %d bytes", err, len(r.GetData()))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a Get from the member's own system was not answered")
	}
}
