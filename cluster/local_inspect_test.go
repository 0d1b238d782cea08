package cluster

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Written and Objects show what each node's store holds: the creator's
// copy and a reader's whole copy, nothing on a node that never read the
// object, and nothing anywhere once it is deleted.
func TestLocalShowsWhatEachStoreHolds(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const size = 200 << 10 // above the inline limit: the copies are the stores'
	if err := l.Client(0).Put(ctx, "seen", randomBytes(3, size)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(1).Get(ctx, "seen"); err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{size, size, 0} {
		if got := l.Written(i, "seen"); got != want {
			t.Errorf("node %d holds %d bytes of seen, want %d", i, got, want)
		}
		if held := slices.Contains(l.Objects(i), "seen"); held != (want > 0) {
			t.Errorf("node %d lists seen: %v, want %v", i, held, want > 0)
		}
	}
	if err := l.Client(2).Delete(ctx, "seen"); err != nil {
		t.Fatal(err)
	}
	// The copies go after the Delete's answer (each node drops its own).
	for i := range 3 {
		for ids := l.Objects(i); len(ids) != 0 || l.Written(i, "seen") != 0; ids = l.Objects(i) {
			if ctx.Err() != nil {
				t.Fatalf("node %d still holds %v after the Delete", i, ids)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
