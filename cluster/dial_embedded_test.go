package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A Dial client of an embedded cluster, whose data plane is its
// process's memory, moves bytes inside its requests: its Get, GetInto,
// GetTo and a Put of more than a data-path Put's minimum all complete
// with the exact bytes, well within their deadline.
func TestDialEmbeddedCluster(t *testing.T) {
	l := start(t, Config{Nodes: 2})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	small, large := []byte("v1"), randomBytes(3, 2<<20+5)
	if err := l.Client(1).Put(ctx, "small", small); err != nil {
		t.Fatal(err)
	}
	c, err := Dial(ctx, l.Member(0).Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Put(ctx, "large", large); err != nil {
		t.Fatalf("Put of %d bytes: %v", len(large), err)
	}
	for id, want := range map[string][]byte{"small": small, "large": large} {
		got, err := c.Get(ctx, id)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %d bytes, %v", id, len(got), err)
		}
		dst := make([]byte, len(want))
		if n, err := c.GetInto(ctx, id, dst); err != nil || !bytes.Equal(dst[:n], want) {
			t.Fatalf("GetInto %s: %d bytes, %v", id, n, err)
		}
		var w bytes.Buffer
		if _, err := c.GetTo(ctx, id, &w); err != nil || !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("GetTo %s: %d bytes, %v", id, w.Len(), err)
		}
	}
	got, err := l.Client(1).Get(ctx, "large")
	if err != nil || !bytes.Equal(got, large) {
		t.Fatalf("the Dial client's Put, read from a member: %d bytes, %v", len(got), err)
	}
}
