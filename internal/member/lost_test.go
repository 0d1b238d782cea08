package member

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// An object whose only copy dies with its node is LOST at once on every
// other node, and a new Put of the id brings it back.
func TestGetOfAnObjectWhoseOnlyCopyDiedFailsFastWithLost(t *testing.T) {
	l := start(t, Config{Nodes: 4})
	ctx := deadline(t, 30*time.Second)
	data := randomBytes(5, 1<<20)
	if err := l.Client(1).Put(ctx, "only", data); err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	// Within a deadline far shorter than the Get's own: a Get that waited
	// for a copy would end in TIMEOUT instead.
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := l.Client(2).Get(gctx, "only")
	if !errors.Is(err, messages.ErrLost) {
		t.Fatalf("get after the only copy died: %v, want LOST", err)
	}
	if err := l.Client(3).Put(ctx, "only", data); err != nil {
		t.Fatalf("put again: %v", err)
	}
	got, err := l.Client(2).Get(ctx, "only")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get after the new put: %v", err)
	}
}
