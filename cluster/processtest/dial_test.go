package processtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// TestDial: a client that is not a member, on `hoplite node` processes.
// It Puts and Gets through the member it dialed, lists every object once
// across pages and shards, sees the members, and reads each member's store
// use; bad addresses and cursors are typed errors.
func TestDial(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	nodes, tc, view := startConverged(t, bin, slots, seeds)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Dial(ctx, nodes[1].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	members, err := c.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range members {
		ids = append(ids, m.ID)
		if n := slices.IndexFunc(nodes, func(p *nodeProc) bool { return p.id == m.ID }); n < 0 || nodes[n].address != m.Address {
			t.Fatalf("member %+v is not one of the processes", m)
		}
	}
	if !slices.Equal(ids, view) {
		t.Fatalf("members %v, want %v", ids, view)
	}

	// Objects Put through the client (creator: the dialed member), one
	// large enough to cross the data plane when another member Gets it.
	want := map[string]bool{}
	for i := range 130 {
		id := fmt.Sprintf("dial-%03d", i)
		if err := c.PutInt32s(ctx, id, []int32{int32(i), -int32(i)}); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
		want[id] = true
	}
	big := randomBytes(9, 3<<20+17)
	if err := c.Put(ctx, "dial-big", big); err != nil {
		t.Fatal(err)
	}
	want["dial-big"] = true
	getExact(t, tc.of(nodes[2]), "dial-big", big)
	if v, err := c.GetInt32s(ctx, "dial-007"); err != nil || !slices.Equal(v, []int32{7, -7}) {
		t.Fatalf("get dial-007: %v %v", v, err)
	}
	if err := c.Delete(ctx, "dial-000"); err != nil {
		t.Fatal(err)
	}
	delete(want, "dial-000")

	// List in pages of 40: every object exactly once, then no cursor.
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		page, err := c.List(ctx, cursor, 40)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Objects) > 40 {
			t.Fatalf("page of %d objects, limit 40", len(page.Objects))
		}
		for _, o := range page.Objects {
			seen[o.GetObjectId()]++
			if o.GetObjectId() == "dial-big" && (o.GetSize() != int64(len(big)) || o.GetCompleteCopies() < 2) {
				t.Fatalf("dial-big listed as %v: want its size and at least 2 complete copies", o)
			}
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
		if pages > 100 {
			t.Fatal("List does not end")
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Fatalf("%s listed %d times", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("listed %d objects, want %d (a deleted one listed?)", len(seen), len(want))
	}
	if pages < 4 {
		t.Fatalf("%d pages for %d objects of 40 per page", pages, len(want))
	}

	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hosted := 0
	for _, m := range st.Members {
		if m.Err != nil {
			t.Fatalf("status of %s: %v", m.ID, m.Err)
		}
		hosted += m.Shards
		if m.Node.GetCapacity() != 256<<20 || m.Node.GetNode().GetNodeId() != m.ID {
			t.Fatalf("status of %s: %v", m.ID, m.Node)
		}
		if m.ID == nodes[1].id && (m.Node.GetUsed() < int64(len(big)) || m.Node.GetPinned() < int64(len(big)) || m.Node.GetObjects() < 2) {
			t.Fatalf("the dialed member created everything; its status %v", m.Node)
		}
	}
	if len(st.Members) != 3 || hosted != st.Shards || st.Shards != testShards {
		t.Fatalf("status: %d members hosting %d of %d shards", len(st.Members), hosted, st.Shards)
	}

	// Bad input.
	if _, err := c.List(ctx, "not-a-cursor", 10); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("bad cursor: %v", err)
	}
	if _, err := c.List(ctx, "", 5000); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("limit 5000: %v", err)
	}
	if _, err := cluster.Dial(ctx, "no-port"); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("dial no-port: %v", err)
	}
	// Something that listens but is not a member: UNAVAILABLE at the
	// deadline, not a hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dctx, dcancel := context.WithTimeout(ctx, 2*time.Second)
	defer dcancel()
	if _, err := cluster.Dial(dctx, ln.Addr().String()); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("dial a port that is not a member: %v", err)
	}
	gctx, gcancel := context.WithTimeout(ctx, time.Second)
	defer gcancel()
	if _, err := c.Get(gctx, "never-put"); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("get of an id never put: %v, want TIMEOUT (a Get waits for the object)", err)
	}
}
