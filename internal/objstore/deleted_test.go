package objstore

import (
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// The deletions a store remembers for rebuilt directory shards: FIFO,
// bounded, deduplicated; forgotten when the id is live again or the node
// fails.
func TestStoreRemembersDeletionsBounded(t *testing.T) {
	s := NewStore(1 << 20)
	if s.deletedLimit != 1<<16 {
		t.Fatalf("limit %d, want the directory's TombstoneLimit", s.deletedLimit)
	}
	s.deletedLimit = 3
	for _, id := range []string{"a", "b", "a", "c", "d"} {
		s.NoteDeleted(id)
	}
	if got := s.DeletedIDs(); !slices.Equal(got, []string{"b", "c", "d"}) {
		t.Fatalf("deleted %v, want [b c d]", got)
	}
	s.ForgetDeleted("c")
	s.ForgetDeleted("never")
	if got := s.DeletedIDs(); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("after forget: %v", got)
	}
	s.Fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "node failed"))
	s.NoteDeleted("e")
	if got := s.DeletedIDs(); len(got) != 0 {
		t.Fatalf("a failed node remembers %v", got)
	}
}
