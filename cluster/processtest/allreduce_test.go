package processtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessAllReduce runs AllReduces on four `hoplite node` members
// started with -allreduce-shape sliced (on loopback the cost model's
// choice follows the measured L and B, which vary): one of all four
// sources, sliced, and one of three of the four, which only
// reduce-then-broadcast can do. Every member Gets each target, exact.
func TestProcessAllReduce(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range slots {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-allreduce-shape", coordinator.ShapeSliced))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)

	const elems = 128<<10 + 3 // no slice boundary falls on a round number
	var sources []string
	data := map[string][]byte{}
	for i, n := range nodes {
		id := fmt.Sprintf("ar-src-%d", i)
		data[id] = randomBytes(uint64(300+i), 4*elems)
		putRetry(t, c.of(n), id, data[id])
		sources = append(sources, id)
	}
	sum := func(ids []string) []byte {
		out := make([]byte, 4*elems)
		for _, id := range ids {
			for k := 0; k < elems; k++ {
				binary.LittleEndian.PutUint32(out[4*k:], binary.LittleEndian.Uint32(out[4*k:])+binary.LittleEndian.Uint32(data[id][4*k:]))
			}
		}
		return out
	}
	for _, tc := range []struct {
		target string
		num    int
		shape  string
	}{{"ar-all", 4, coordinator.ShapeSliced}, {"ar-three", 3, coordinator.ShapeDAry}} {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		r, err := c.of(nodes[0]).AllReduce(ctx, tc.target, sources, tc.num, messages.ReduceOp_SUM, messages.DType_INT32)
		cancel()
		if err != nil {
			t.Fatalf("AllReduce %s (%d of 4): %v", tc.target, tc.num, err)
		}
		if got := r.GetPlan().GetShape(); got != tc.shape {
			t.Fatalf("AllReduce %s (%d of 4): shape %q, want %q", tc.target, tc.num, got, tc.shape)
		}
		if len(r.GetReducedIds()) != tc.num {
			t.Fatalf("AllReduce %s reduced %v, want %d sources", tc.target, r.GetReducedIds(), tc.num)
		}
		want := sum(r.GetReducedIds())
		for _, n := range nodes {
			getExact(t, c.of(n), tc.target, want)
		}
	}
}
