package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/memberview"
)

// A Dial client's periodic refresh sends the digest of the view it
// learned: a member whose view is unchanged answers without it (O(1)
// bytes whatever the cluster's size), and the client keeps what it
// knew; a digest that no longer holds gets the whole view, which the
// client learns.
func TestDialRefreshSendsItsViewsDigest(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, l.Member(0).Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.ep.mu.Lock()
	view, known := slices.Clone(c.ep.view), slices.Clone(c.ep.known)
	c.ep.mu.Unlock()
	if len(view) != 3 || len(known) != 3 {
		t.Fatalf("after Dial the client knows view %v, endpoints %v; want the 3 members", view, known)
	}
	addr := c.memberAddr()
	r, err := c.helloDigest(ctx, addr, memberview.Digest(view))
	if err != nil {
		t.Fatal(err)
	}
	if !r.GetViewSame() || len(r.GetView()) != 0 || len(r.GetViewAddresses()) != 0 {
		t.Fatalf("unchanged view: view_same %v with %d members listed; want no view", r.GetViewSame(), len(r.GetView()))
	}
	c.refresh(ctx)
	c.ep.mu.Lock()
	after := slices.Clone(c.ep.known)
	c.ep.mu.Unlock()
	if !slices.Equal(after, known) {
		t.Fatalf("a refresh answered without the view left the client knowing %v, want %v", after, known)
	}
	// A stale view: the client's digest names two members only.
	c.ep.mu.Lock()
	c.ep.view, c.ep.known = view[:2], nil
	c.ep.mu.Unlock()
	c.refresh(ctx)
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	if !slices.Equal(c.ep.view, view) || len(c.ep.known) != 3 {
		t.Fatalf("after a refresh with a stale digest the client knows view %v, endpoints %v; want %v and 3", c.ep.view, c.ep.known, view)
	}
}
