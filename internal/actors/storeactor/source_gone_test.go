package storeactor

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A tree position whose source's copy is not where its task said
// (evicted or dropped after the coordinator placed it) waits for the
// repaired task, as for an input whose node failed (UNAVAILABLE), rather
// than fail the Reduce NOT_FOUND for a source that exists elsewhere. An
// intermediate's NOT_FOUND, a sliced AllReduce's, and other errors stay.
func TestSourceCopyGoneWaitsForTheRepair(t *testing.T) {
	notHere := messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on this node", "s")
	tree := leafTask("r#1", 0, "s", 64)
	if err := sourceCopyGone(tree, "s", "n1", notHere); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a source's missing copy: %v, want UNAVAILABLE", err)
	}
	if err := sourceCopyGone(tree, internalPrefix+"r#1/2/1", "n1", notHere); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("an intermediate's missing output: %v, want NOT_FOUND as it was", err)
	}
	deleted := messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "s")
	if err := sourceCopyGone(tree, "s", "n1", deleted); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("a deleted source: %v, want DELETED as it was", err)
	}
	sliced := leafTask("r#2", 0, "s", 64)
	sliced.Sliced = true
	if err := sourceCopyGone(sliced, "s", "n1", notHere); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("a sliced AllReduce's missing source: %v, want NOT_FOUND as it was", err)
	}
}
