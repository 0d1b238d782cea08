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

// loopCaller is a data plane whose every call is served by this
// process's controlShard, as a member serves its peers' control requests.
type loopCaller struct{ s *fuzzShard }

func (c loopCaller) Call(ctx context.Context, _ string, kind byte, req []byte) ([]byte, error) {
	switch kind {
	case messages.ControlCreate:
		return ServeCreate(ctx, c.s.system.Root, c.s.shardFor, req)
	case messages.ControlDelete:
		return ServeDelete(ctx, c.s.system.Root, c.s.shardFor, req)
	}
	return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "unknown control request kind %q", kind)
}

// A CreateObject on the data plane registers the object at the shard as
// the same actor request does: the shard answers the call, and a Locate
// then gets the inline bytes. A request that does not decode is
// INVALID_ARGUMENT, one for a shard not on this member UNAVAILABLE, and
// the shard's own refusal comes back in the reply.
func TestCreateOnTheDataPlane(t *testing.T) {
	s := controlShard()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := &messages.CreateObject{ObjectId: "created-on-the-plane", Size: 3, Creator: s.creator, HasInline: true, InlineData: []byte("xyz")}
	r, err := CallCreate(ctx, loopCaller{s}, "here", c)
	if err != nil || r.GetError() != nil || r.GetObjectId() != c.GetObjectId() {
		t.Fatalf("CallCreate: %v, %v", r, err)
	}
	req, _ := proto.Marshal(&messages.Locate{ObjectId: c.GetObjectId(), Receiver: &messages.NodeRef{NodeId: "n2"}, TimeoutMs: 5000})
	b, err := ServeLocate(ctx, s.system.Root, s.shardFor, req)
	var l messages.LocateReply
	if err != nil || proto.Unmarshal(b, &l) != nil || !bytes.Equal(l.GetInlineData(), []byte("xyz")) {
		t.Fatalf("Locate after the create: %v, %v", &l, err)
	}
	// Other bytes under the id: the shard refuses, in the reply.
	other := proto.CloneOf(c)
	other.InlineData, other.Fingerprint = []byte("abc"), 7
	if r, err := CallCreate(ctx, loopCaller{s}, "here", other); err != nil || r.GetError() == nil {
		t.Fatalf("a second create with other bytes: %v, %v; want the shard's refusal", r, err)
	}
	if _, err := ServeCreate(ctx, s.system.Root, s.shardFor, []byte{0xff, 0xff}); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a CreateObject that does not decode: %v, want INVALID_ARGUMENT", err)
	}
	away, _ := proto.Marshal(&messages.CreateObject{ObjectId: "elsewhere-1", Size: 1, Creator: s.creator})
	if _, err := ServeCreate(ctx, s.system.Root, s.shardFor, away); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a CreateObject for a shard on another member: %v, want UNAVAILABLE", err)
	}
	s.stillGood(t)
}
