package storeactor

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// putCopy makes a creator copy of data in s with its first n bytes written,
// as putObject leaves it when a DropObject comes in.
func putCopy(t *testing.T, s *objstore.Store, id string, data []byte, n int) *objstore.Object {
	t.Helper()
	o, _, err := s.Create(id, int64(len(data)), fingerprint.Of(data))
	if err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		if err := o.NewWriter().Append(data[:n]); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestPutEndedAfterWholeSucceeds is the window a large object's Put has
// between its last chunk and Complete: a receiver streaming from the copy
// has every byte, its Get returns and it Deletes the object, whose
// DropObject reaches this node before Complete. No hook stops a Put
// there, so the decision is tested on the store states it sees.
func TestPutEndedAfterWholeSucceeds(t *testing.T) {
	s := objstore.NewStore(1 << 20)
	data := testutil.Pattern(1, 4096)
	o := putCopy(t, s, "w", data, len(data))
	s.Remove("w", messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "w"))
	err := s.Complete(o)
	testutil.WantErr(t, err, messages.ErrDeleted) // what the Put used to answer
	if got := putEnded(o, err, false); got != nil {
		t.Fatalf("Put whose bytes were whole before the Delete: %v, want success", got)
	}
	if objs := s.Objects(); len(objs) != 0 {
		t.Fatalf("%d objects left in the store", len(objs))
	}
	if got := s.Used(); got != 0 {
		t.Fatalf("Used() = %d, want 0", got)
	}
}

func TestPutEndedBeforeWholeFails(t *testing.T) {
	s := objstore.NewStore(1 << 20)
	data := testutil.Pattern(2, 4096)
	o := putCopy(t, s, "p", data, 1024)
	s.Remove("p", messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "p"))
	err := o.NewWriter().Append(data[1024:])
	testutil.WantErr(t, err, messages.ErrDeleted)
	// Nobody can have read all of it: the Put fails...
	testutil.WantErr(t, putEnded(o, err, false), messages.ErrDeleted)
	// ...unless the directory served the bytes from the registration on
	// (inline) or they existed already.
	if got := putEnded(o, err, true); got != nil {
		t.Fatalf("Put of readable bytes deleted mid-copy: %v, want success", got)
	}
}

func TestPutEndedKeepsOtherErrors(t *testing.T) {
	s := objstore.NewStore(1 << 20)
	data := testutil.Pattern(3, 64)
	o := putCopy(t, s, "r", data, len(data))
	// A Reduce re-creating its target drops the old copy with RESET: that
	// is not a consumer's Delete, even with every byte written.
	s.Remove("r", messages.Errorf(messages.ErrorCode_RESET, "re-created"))
	err := s.Complete(o)
	testutil.WantErr(t, putEnded(o, err, true), messages.ErrReset)
}

func TestPutEndedEmptyObjectIsWhole(t *testing.T) {
	s := objstore.NewStore(1 << 20)
	o := putCopy(t, s, "e", nil, 0)
	s.Remove("e", messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "e"))
	if got := putEnded(o, s.Complete(o), false); got != nil {
		t.Fatalf("empty Put deleted after registration: %v, want success", got)
	}
}

// TestSamePutJudgesTheCopyItJoined: a second Put of an id this node holds
// waits for that copy; deleted after it was whole, the same bytes still
// succeed and other bytes still conflict, while a copy deleted before it
// was whole fails the Put with DELETED.
func TestSamePutJudgesTheCopyItJoined(t *testing.T) {
	// A safety net against a hang, never a timing assertion.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	n := &StoreNode{}
	s := objstore.NewStore(1 << 20)
	data := testutil.Pattern(4, 4096)
	deleted := messages.Errorf(messages.ErrorCode_DELETED, "deleted")

	whole := putCopy(t, s, "whole", data, len(data))
	wait := make(chan error, 1)
	go func() { wait <- n.samePut(ctx, whole, data) }()
	s.Remove("whole", deleted) // wakes the waiting Put
	if err := testutil.Recv(t, wait, "samePut after the Delete"); err != nil {
		t.Fatalf("same bytes, copy whole before the Delete: %v, want success", err)
	}
	testutil.WantErr(t, n.samePut(ctx, whole, testutil.Pattern(5, 4096)), messages.ErrConflict)

	part := putCopy(t, s, "part", data, 100)
	go func() { wait <- n.samePut(ctx, part, data) }()
	s.Remove("part", deleted)
	testutil.WantErr(t, testutil.Recv(t, wait, "samePut after the Delete"), messages.ErrDeleted)

	done := putCopy(t, s, "done", data, len(data))
	if err := s.Complete(done); err != nil {
		t.Fatal(err)
	}
	if err := n.samePut(ctx, done, data); err != nil {
		t.Fatalf("same bytes, complete copy: %v", err)
	}
	testutil.WantErr(t, n.samePut(ctx, done, testutil.Pattern(6, 4096)), messages.ErrConflict)
}
