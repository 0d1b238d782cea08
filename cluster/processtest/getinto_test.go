package processtest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// TestProcessGetInto: GetInto across processes, on `hoplite node`
// processes. A member that this test process joins fetches objects that
// a node process Put straight from that process's TCP data plane into one
// reused buffer (the second overwriting the first), exact, keeping no
// copy. A client that is not a member (cluster.Dial) has GetInto too: its
// member brings a copy into its store, and the bytes stream from the
// member's data plane into the buffer, with the same results. For both, a
// short buffer and a missing object fail as Get does.
func TestProcessGetInto(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	tc := newTestClient(t)
	tc.converge(t, a, b)
	one, two := randomBytes(31, 2<<20+3), randomBytes(32, 1<<20+1)
	putRetry(t, tc.of(a), "into-one", one)
	putRetry(t, tc.of(a), "into-two", two)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, manage, _ := net.SplitHostPort(slots[2].manage)
	port, _ := strconv.Atoi(manage)
	m, err := cluster.Join(ctx, cluster.MemberConfig{Bind: slots[2].bind, ManagePort: port, Seeds: seeds,
		ChunkSize: 256 << 10, RefreshInterval: 100 * time.Millisecond, DefaultTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	if err := m.WaitMembers(ctx, 3); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Dial(ctx, b.address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, cl := range []struct {
		name string
		c    *storenode.Client
	}{{"a joined member", m.Client()}, {"a Dial client", c.Client}} {
		buf := make([]byte, 3<<20)
		for _, o := range []struct {
			id   string
			want []byte
		}{{"into-one", one}, {"into-two", two}, {"into-one", one}} {
			n, err := cl.c.GetInto(ctx, o.id, buf)
			if err != nil || n != len(o.want) || !bytes.Equal(buf[:n], o.want) {
				t.Fatalf("%s: GetInto(%s): %d bytes, %v", cl.name, o.id, n, err)
			}
		}
		if _, err := cl.c.GetInto(ctx, "into-one", buf[:len(one)-1]); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("%s: a short buffer: %v", cl.name, err)
		}
		sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, gerr := cl.c.Get(sctx, "into-never")
		scancel()
		ictx, icancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, ierr := cl.c.GetInto(ictx, "into-never", buf)
		icancel()
		if !errors.Is(gerr, messages.ErrTimeout) || !errors.Is(ierr, messages.ErrTimeout) {
			t.Fatalf("%s: a missing object: Get %v, GetInto %v, want TIMEOUT", cl.name, gerr, ierr)
		}
	}
	info, err := c.Info(ctx, "into-one", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range info.GetLocations() {
		if l.GetNode().GetNodeId() == m.ID() {
			t.Fatalf("the joined member holds a copy after GetInto: %v", info.GetLocations())
		}
	}
}
