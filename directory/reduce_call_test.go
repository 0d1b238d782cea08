package directory

import (
	"errors"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A rebuilt shard (its old home died with a Reduce's coordinator) learns
// from a republished complete target which call committed it and what it
// reduces. An attempt of that call started again here answers with that
// result; reducing again would replace bytes that readers may have read.
// Any other Reduce into the id still fails CONFLICT.
func TestReserveAnswersAnEarlierAttemptsCommittedResult(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	first := ReduceID("t", "call1", "a1")
	tb.Publish(&messages.PublishLocation{ObjectId: "t", Node: node(2), State: messages.LocationState_COMPLETE,
		Size: 64, Fingerprint: 9, Creator: true, ProducedBy: first, ReducedIds: []string{"s2", "s0"}})

	got, err := tb.Reserve("t", ReduceID("t", "call1", "a2"))
	if err != nil || !slices.Equal(got, []string{"s2", "s0"}) {
		t.Fatalf("another attempt of the committing call: %v, %v; want the committed [s2 s0]", got, err)
	}
	got, err = tb.Reserve("t", ReduceID("t", "call2", "b1"))
	if !errors.Is(err, messages.ErrConflict) || got != nil {
		t.Fatalf("a Reduce of another call into the committed target: %v, %v; want CONFLICT", got, err)
	}
	// The Reserve that answered reserved nothing: a third attempt is
	// answered alike, not told that the target is being produced.
	if got, err := tb.Reserve("t", ReduceID("t", "call1", "a3")); err != nil || len(got) != 2 {
		t.Fatalf("a third attempt: %v, %v", got, err)
	}
}

// A target Put by hand (or republished without a producer) is no call's
// result: a Reduce into it fails CONFLICT, whatever its call.
func TestReserveOfAPutTargetConflicts(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	tb.Publish(&messages.PublishLocation{ObjectId: "t", Node: node(1), State: messages.LocationState_COMPLETE,
		Size: 64, Fingerprint: 9, Creator: true})
	if _, err := tb.Reserve("t", ReduceID("t", "call1", "a1")); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("Reduce into a Put object: %v, want CONFLICT", err)
	}
}

func TestCallOf(t *testing.T) {
	for _, c := range []struct{ id, call string }{
		{ReduceID("a.b#c", "k", "n"), "a.b#c#k"},
		{"t#ab12", "t#ab12"},
		{ReduceID("t", "k", "n1"), CallOf(ReduceID("t", "k", "n2"))},
	} {
		if got := CallOf(c.id); got != c.call {
			t.Errorf("CallOf(%q) = %q, want %q", c.id, got, c.call)
		}
	}
}
