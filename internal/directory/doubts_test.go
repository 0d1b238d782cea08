package directory

import (
	"slices"
	"testing"
)

// Doubts lists what a table must hand over when its shard moves: the
// objects in doubt (their creator failed while a receiver's copy may be
// whole), not the readable ones, nor those already marked lost (the
// keeper has them), nor an object whose creator withdrew before any copy
// was whole (it is not born yet: no LOST for it).
func TestDoubtsAreTheObjectsOnlyTheTableKnowsMayBeLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	createComplete(t, tb, "doubt", 1<<20, 0)
	locate(tb, "doubt", 1, t0) // n1 <- n0
	createComplete(t, tb, "lost", 1<<20, 0)
	createComplete(t, tb, "kept", 1<<20, 2)
	if d := tb.Doubts(); len(d) != 0 {
		t.Fatalf("doubts before any failure: %v, want none", d)
	}
	noLoss(t, "n0 fails", tb.onNodeFailed("n0").Sends)
	if d, want := tb.Doubts(), []string{"doubt"}; !slices.Equal(d, want) {
		t.Fatalf("doubts after n0 failed: %v, want %v", d, want)
	}
	if _, ok := tb.lost["lost"]; !ok {
		t.Fatal(`"lost" (its only copy on n0, nobody fetching it) is not marked lost`)
	}
	tb.onFetchDone(fetchDone(tb, "doubt", node(1), node(0)))
	if d := tb.Doubts(); len(d) != 0 {
		t.Fatalf("doubts once the receiver's copy proved whole: %v, want none", d)
	}
}
