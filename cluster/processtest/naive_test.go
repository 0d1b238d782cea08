package processtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// `hoplite node -experiments naive` members are the baseline end to end: receivers
// that Get at the same time all fetch from the creator. Chunks are slowed
// so that the transfers overlap: a member that ignored the experiment would send
// the second receiver to the first one's partial copy.
func TestProcessNaiveNodesFetchFromTheCreator(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startNode(t, bin, s, seeds, "-experiments", "naive", "-test-chunk-delay", "2ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	data := randomBytes(11, 2<<20+17)
	putRetry(t, c.of(nodes[0]), "naive-obj", data)
	errs := make(chan error, 2)
	for _, n := range nodes[1:] {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := c.of(n).Get(ctx, "naive-obj")
			if err == nil && len(got) != len(data) {
				err = fmt.Errorf("%d bytes, want %d", len(got), len(data))
			}
			if err != nil {
				err = fmt.Errorf("get on %s: %w", n.id, err)
			}
			errs <- err
		}()
	}
	for range nodes[1:] {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[1:] {
		getExact(t, c.of(n), "naive-obj", data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.of(nodes[0]).Info(ctx, "naive-obj", false)
	if err != nil {
		t.Fatal(err)
	}
	senders := testutil.SenderOf(info)
	if len(senders) != 2 {
		t.Fatalf("transfers to %d receivers, want 2: %v", len(senders), senders)
	}
	for r, s := range senders {
		if s != nodes[0].id {
			t.Errorf("naive %s fetched from %s, not the creator %s", r, s, nodes[0].id)
		}
	}
}
