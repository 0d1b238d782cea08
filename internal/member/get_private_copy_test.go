package member

import (
	"bytes"
	"testing"
	"time"
)

// TestGetPrivateCopyInProcess: an in-process Client's Get returns a copy
// the caller owns, of a fetched copy and of the creator's alike: writing
// into it changes neither what the node holds nor what the next Get or
// GetReadOnly returns, and two Gets never share memory.
func TestGetPrivateCopyInProcess(t *testing.T) {
	l := start(t, Config{Nodes: 2, ChunkSize: 256 << 10})
	ctx := deadline(t, 30*time.Second)
	want := randomBytes(7, 6<<20+11) // past bufalloc.HugeMin: a buffer of its own
	if err := l.Client(0).Put(ctx, "x", want); err != nil {
		t.Fatal(err)
	}
	for _, node := range []int{1, 0} { // fetched, then the creator's
		c := l.Client(node)
		got, err := c.Get(ctx, "x")
		if err != nil {
			t.Fatalf("node-%d: %v", node, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("node-%d: Get returned other bytes than were Put", node)
		}
		ro, err := c.GetReadOnly(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if &ro[0] == &got[0] {
			t.Fatalf("node-%d: Get returned the node's own buffer", node)
		}
		for i := range got {
			got[i] ^= 0xff
		}
		again, err := c.Get(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		if &again[0] == &got[0] {
			t.Fatalf("node-%d: two Gets share one buffer", node)
		}
		if !bytes.Equal(again, want) || !bytes.Equal(ro, want) {
			t.Fatalf("node-%d: a write into a Get's bytes reached the node's copy", node)
		}
	}
}
