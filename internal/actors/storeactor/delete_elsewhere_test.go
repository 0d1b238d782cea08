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

func deleteMessage(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string) *messages.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Delete{ObjectId: id, TimeoutMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*messages.DeleteReply)
	if !ok {
		t.Fatalf("Delete answered %T", res)
	}
	return r.GetError()
}

// A Delete whose shard is on another member asks it through the node's
// Deleter (the data plane). The node's copy from before the Delete is
// dropped once the shard deleted the object, even when the shard's
// answer does not name this node (its record of the copy still on its
// way); a failed call fails the Delete; a Deleter that cannot carry the
// request sends it as an actor request.
func TestDeleteElsewhereThroughTheDeleter(t *testing.T) {
	var mode atomic.Int32 // 0 answer, 1 fail, 2 ask as an actor
	var calls atomic.Int32
	system, node, store := elsewhereNodeDeleting(t, func(_ context.Context, _ *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
		return &messages.CreateObjectReply{ObjectId: c.GetObjectId(), RequestId: c.GetRequestId(), RecordedComplete: c.GetComplete()}, nil
	}, func(ctx context.Context, shard *actor.PID, d *messages.DeleteObject) (*messages.DeleteObjectReply, error) {
		calls.Add(1)
		if _, ok := ctx.Deadline(); !ok || d.GetRequestId() == 0 {
			t.Errorf("the Deleter was asked %v without a deadline or a request id", d)
		}
		switch mode.Load() {
		case 1:
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the shard's member went")
		case 2:
			return nil, ErrAskAsActor
		}
		// Deleted, naming no node: the shard had not heard of this
		// node's copy yet.
		return &messages.DeleteObjectReply{ObjectId: d.GetObjectId(), RequestId: d.GetRequestId()}, nil
	})
	for _, id := range []string{"a", "b", "c"} {
		if e := putMessage(t, system, node, id, []byte("small bytes "+id)); e != nil {
			t.Fatalf("Put %s: %v", id, e)
		}
	}
	if e := deleteMessage(t, system, node, "a"); e != nil {
		t.Fatalf("Delete: %v", e)
	}
	if store.Lookup("a") != nil {
		t.Error("the node kept its copy of a deleted object that the shard's answer did not name")
	}
	mode.Store(1)
	if e := deleteMessage(t, system, node, "b"); !errors.Is(messages.ErrOrNil(e), messages.ErrUnavailable) {
		t.Errorf("Delete whose call failed: %v, want UNAVAILABLE", e)
	}
	if store.Lookup("b") == nil {
		t.Error("a Delete the shard never answered dropped the node's copy")
	}
	// Asked as an actor: the shard's PID names a member nobody runs, so
	// the request is undeliverable and the Delete fails UNAVAILABLE.
	mode.Store(2)
	if e := deleteMessage(t, system, node, "c"); !errors.Is(messages.ErrOrNil(e), messages.ErrUnavailable) {
		t.Errorf("Delete sent as an actor request to nobody: %v, want UNAVAILABLE", e)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("the Deleter was asked %d times, want 3", n)
	}
}
