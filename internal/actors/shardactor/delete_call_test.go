package shardactor

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A DeleteObject on the data plane deletes the object at the shard as
// the same actor request does: the reply names the creator's node, and
// a Locate then gets DELETED. A request that does not decode is
// INVALID_ARGUMENT, one for a shard not on this member UNAVAILABLE, and
// the shard's own answer (an id it does not know) comes back in the
// reply.
func TestDeleteOnTheDataPlane(t *testing.T) {
	s := controlShard()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &messages.CreateObject{ObjectId: "deleted-on-the-plane", Size: 3, Creator: s.creator, HasInline: true, InlineData: []byte("xyz")}
	if r, err := CallCreate(ctx, loopCaller{s}, "here", c); err != nil || r.GetError() != nil {
		t.Fatalf("CallCreate: %v, %v", r, err)
	}
	r, err := CallDelete(ctx, loopCaller{s}, "here", &messages.DeleteObject{ObjectId: c.GetObjectId(), RequestId: 9})
	if err != nil || r.GetError() != nil || r.GetRequestId() != 9 || len(r.GetDropped()) != 1 || r.GetDropped()[0].GetNodeId() != s.creator.GetNodeId() {
		t.Fatalf("CallDelete: %v, %v; want the creator's node dropped and the request id echoed", r, err)
	}
	req, _ := proto.Marshal(&messages.Locate{ObjectId: c.GetObjectId(), Receiver: &messages.NodeRef{NodeId: "n2"}, TimeoutMs: 5000})
	b, err := ServeLocate(ctx, s.system.Root, s.shardFor, req)
	var l messages.LocateReply
	if err != nil || proto.Unmarshal(b, &l) != nil || !errors.Is(messages.ErrOrNil(l.GetError()), messages.ErrDeleted) || bytes.Equal(l.GetInlineData(), []byte("xyz")) {
		t.Fatalf("Locate after the delete: %v, %v; want DELETED", &l, err)
	}
	if r, err := CallDelete(ctx, loopCaller{s}, "here", &messages.DeleteObject{ObjectId: "never-created"}); err != nil || r.GetError() == nil {
		t.Fatalf("a delete of an id the shard never knew: %v, %v; want the shard's answer in the reply", r, err)
	}
	if _, err := ServeDelete(ctx, s.system.Root, s.shardFor, []byte{0xff, 0xff}); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a DeleteObject that does not decode: %v, want INVALID_ARGUMENT", err)
	}
	away, _ := proto.Marshal(&messages.DeleteObject{ObjectId: "elsewhere-1"})
	if _, err := ServeDelete(ctx, s.system.Root, s.shardFor, away); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a DeleteObject for a shard on another member: %v, want UNAVAILABLE", err)
	}
	s.stillGood(t)
}
