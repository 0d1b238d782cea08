package storeactor

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// TestLossDropKeepsAWholeCopy: a shard that finds an object lost drops
// its partial copies, which can no longer complete. A copy whose stream
// outran the failure is whole by the time that drop arrives: the node
// keeps it (its report ends the loss at the shard) and serves it, while a
// copy still partial is freed, and a Delete's drop frees a whole one.
func TestLossDropKeepsAWholeCopy(t *testing.T) {
	loc := &scriptedLocator{answer: func(context.Context, int, *messages.Locate) (*messages.LocateReply, error) {
		return nil, errors.New("no Locate expected: the copy is here")
	}}
	sn := scriptedNode(t, loc, nil)
	data := testutil.Pattern(3, 4096)
	for _, id := range []string{"whole", "deleted"} {
		if err := sn.store.Complete(putCopy(t, sn.store, id, data, len(data))); err != nil {
			t.Fatal(err)
		}
	}
	putCopy(t, sn.store, "partial", data, len(data)/2)
	lost := func(id string) *messages.Error {
		return messages.Errorf(messages.ErrorCode_LOST, "object %q is lost: no complete copy remains", id)
	}
	sn.system.Root.Send(sn.node, &messages.DropObject{ObjectId: "whole", Reason: lost("whole")})
	sn.system.Root.Send(sn.node, &messages.DropObject{ObjectId: "partial", Reason: lost("partial")})
	sn.system.Root.Send(sn.node, &messages.DropObject{ObjectId: "deleted", Reason: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "deleted")})
	// The node takes its messages in order: the Get is served after the
	// drops.
	got, err := scriptedGet(t, sn.system, sn.node, "whole")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get of the whole copy after the loss's drop: %d bytes, %v; want its %d bytes", len(got), err, len(data))
	}
	if sn.store.Lookup("whole") == nil {
		t.Fatal("the whole copy was freed by the loss's drop")
	}
	if sn.store.Lookup("partial") != nil {
		t.Fatal("the partial copy outlived the loss's drop")
	}
	if sn.store.Lookup("deleted") != nil {
		t.Fatal("a whole copy outlived a Delete's drop")
	}
	if n := loc.count(); n != 0 {
		t.Fatalf("%d Locates; want none", n)
	}
}
