// Built without the race detector only: these tests move more than 256
// MiB through a copy, which under it takes most of their half a minute
// (scripts/test runs them in its pass without -race).

//go:build !race

package member

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// A Put from another actor system whose message is past what one remote
// message carries is answered INVALID_ARGUMENT naming the limit, at
// once, by the sender's own system; gRPC refused it, the writer tore the
// connection to the member down, and the Put was answered UNAVAILABLE
// as if the member had failed. The connection stays up: a small Put
// right after goes through.
func TestPutPastTheRemoteMessageBoundIsRefused(t *testing.T) {
	l := start(t, Config{Nodes: 2, Capacity: 1 << 30})
	big := bytes.Repeat([]byte{7}, maxRemoteMessage+1)
	replies := make(chan *messages.PutReply, 2)
	l.System().Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(l.StoreNode(0), &messages.Put{ObjectId: "big", Data: big, TimeoutMs: 30_000})
			c.Request(l.StoreNode(0), &messages.Put{ObjectId: "small", Data: []byte("fits"), TimeoutMs: 30_000})
		case *messages.PutReply:
			replies <- m
		}
	}))
	got := map[string]error{}
	for range 2 {
		select {
		case r := <-replies:
			got[r.GetObjectId()] = r.GetError().Err()
		case <-time.After(20 * time.Second):
			t.Fatalf("replies so far %v; the rest did not come", got)
		}
	}
	if err := got["big"]; !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "remote message") {
		t.Fatalf("the big Put: %v, want INVALID_ARGUMENT naming the limit", err)
	}
	if err := got["small"]; err != nil {
		t.Fatalf("the small Put after it: %v", err)
	}
}
