package processtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessLocateDeputies: `hoplite node` members started with
// -locate-deputies 2 send their Locates of other members' shards through
// their group's deputy: every member's concurrent Gets of small objects
// get the creator's bytes, the deputies' metrics count the Locates they
// sent on, and a Get that starts after a Delete completed is DELETED
// through them too.
func TestProcessLocateDeputies(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	const n = 4
	slots, seeds := memberSlots(t, n)
	var nodes []*nodeProc
	for i := range n {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-locate-deputies", "2"))
	}
	for _, p := range nodes {
		p.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	const objects = 8
	want := map[string][]byte{}
	for k := range objects {
		id := "deputy-" + strconv.Itoa(k)
		want[id] = randomBytes(uint64(300+k), 1<<10)
		putRetry(t, c.of(nodes[0]), id, want[id])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, (n-1)*objects)
	for _, p := range nodes[1:] {
		for id, data := range want {
			wg.Go(func() {
				got, err := c.of(p).Get(ctx, id)
				if err == nil && !bytes.Equal(got, data) {
					err = fmt.Errorf("%s: wrong bytes", id)
				}
				if err != nil {
					errs <- fmt.Errorf("%s on %s: %w", id, p.id, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	var sent float64
	for _, p := range nodes {
		_, body := scrape(t, p, "/metrics")
		sent += sample(body, "hoplite_locate_deputy_sent_alone_total", "") + sample(body, "hoplite_locate_deputy_batched_total", "")
	}
	if sent == 0 {
		t.Fatal("no member sent a Locate on as a deputy")
	}
	for id := range want {
		if err := c.of(nodes[0]).Delete(ctx, id); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
		for _, p := range nodes[1:] {
			if got, err := c.of(p).Get(ctx, id); !errors.Is(err, messages.ErrDeleted) {
				t.Fatalf("a Get of %s after its Delete completed: %d bytes, %v; want DELETED", id, len(got), err)
			}
		}
	}
}
