package processtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessAllReduce runs AllReduces on four `hoplite node` members
// started with -allreduce-shape sliced (on loopback the cost model's
// choice follows the measured L and B, which vary) and a link rate, so
// that the sliced run's streams are paced: one of all four sources,
// sliced, and one of three of the four, which only reduce-then-broadcast
// can do. Every member Gets each target, exact, and every member sent
// its share of the sliced run through its pacer.
func TestProcessAllReduce(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range slots {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-allreduce-shape", coordinator.ShapeSliced, "-link-rate", "2gbit"))
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
		if tc.shape != coordinator.ShapeSliced {
			continue
		}
		// Each member sends the three slices it does not root in chains
		// and its own slice to three gathers, about 1.5·S = 6·elems bytes
		// (slices are cut on elements): all of it paced.
		for _, n := range nodes {
			_, body := scrape(t, n, "/metrics")
			if got, min := sample(body, "hoplite_data_plane_paced_bytes_total", ""), float64(5*elems); got < min {
				t.Errorf("%s sent %v paced bytes, want at least %v", n.slot.bind, got, min)
			}
		}
	}
}

// TestProcessSlicedAllReduceSurvivesAParticipant: four `hoplite node`
// members forced to slice AllReduces; one that is neither the caller nor
// the coordinator's member is SIGKILLed while the sliced run streams. The
// AllReduce succeeds, re-planned as reduce-then-broadcast (shape d-ary)
// over the three surviving sources, which are exactly its ReducedIds (the
// victim's is unreduced); every survivor Gets the exact sum of those
// three; the coordinator's member counts the re-plan on /metrics and logs
// it. -test-reduce-chunk-delay stretches the run (loopback reduces 2 MiB
// in milliseconds) so that the kill lands inside it; the shape of the
// reply proves it did.
func TestProcessSlicedAllReduceSurvivesAParticipant(t *testing.T) {
	const (
		members = 4
		chunk   = 32 << 10
		// Each chain position and gather waits this long per chunk: a
		// slice of 2 MiB / 4 is 17 chunks, so the sliced run lasts 0.85 s
		// at the very least, however idle the machine; the kill follows
		// its first chunk by a scrape. The re-planned tree (64 chunks)
		// then takes about 3 s.
		delay = "50ms"
		elems = 512<<10 + 3 // no slice boundary falls on a round number
	)
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, members)
	var nodes []*nodeProc
	for i := range slots {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-allreduce-shape", coordinator.ShapeSliced,
			"-chunk-size", strconv.Itoa(chunk), "-test-reduce-chunk-delay", delay))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	// The caller's member runs the coordinator (it hosts the target's
	// shard) and creates the target: losing it ends the AllReduce with
	// UNAVAILABLE by design. The victim is another participant. Every id's
	// shard is on the caller's member too, so no shard moves with the
	// victim (TestProcessChaos covers that): the test is about the sliced
	// run alone, the same on every run.
	caller, victim := nodes[0], nodes[members-1]
	target := idOwnedBy(t, view, caller.id, "sliced-kill")

	// Integer-valued float32s whose sums stay below 2^24: exact in any
	// order of association, so both shapes give the same bits.
	value := func(i, k int) float32 { return float32((k*(i+1) + 7*i) % 4096) }
	var sources []string
	for i, n := range nodes {
		id := idOwnedBy(t, view, caller.id, fmt.Sprintf("sliced-kill-src%d", i))
		b := make([]byte, 4*elems)
		for k := range elems {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(value(i, k)))
		}
		putRetry(t, c.of(n), id, b)
		sources = append(sources, id)
	}
	victimSrc := sources[members-1]
	survivorSrcs := sources[:members-1]
	want := make([]byte, 4*elems)
	for k := range elems {
		var s float32
		for i := range members - 1 {
			s += value(i, k)
		}
		binary.LittleEndian.PutUint32(want[4*k:], math.Float32bits(s))
	}

	_, body := scrape(t, victim, "/metrics")
	sentBefore := sample(body, "hoplite_data_sent_bytes_total", "")
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		r, err := c.of(caller).AllReduce(ctx, target, sources, members, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		done <- result{r, err}
	}()

	// The sliced run is under way once the victim serves its chains: it
	// is a position in every slice's chain (a leaf in one), and its data
	// plane sends nothing else here.
	end := time.Now().Add(30 * time.Second)
	for {
		_, body := scrape(t, victim, "/metrics")
		if sample(body, "hoplite_data_sent_bytes_total", "")-sentBefore >= chunk {
			break
		}
		select {
		case res := <-done:
			t.Fatalf("the AllReduce ended before the victim served a chunk of it: %v (shape %q)", res.err, res.r.GetPlan().GetShape())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("%s served no chunk of the AllReduce within 30s", victim.id)
		}
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	res := <-done // bounded by the AllReduce's own deadline
	if res.err != nil {
		t.Fatalf("AllReduce with participant %s killed: %v", victim.id, res.err)
	}
	r := res.r
	if got := r.GetPlan().GetShape(); got != coordinator.ShapeDAry {
		t.Fatalf("plan shape %q, want the re-planned %q (a sliced reply means the kill came after the run)", got, coordinator.ShapeDAry)
	}
	reduced := slices.Sorted(slices.Values(r.GetReducedIds()))
	if !slices.Equal(reduced, slices.Sorted(slices.Values(survivorSrcs))) {
		t.Fatalf("reduced %v, want exactly the survivors' sources %v", r.GetReducedIds(), survivorSrcs)
	}
	if !slices.Equal(r.GetUnreducedIds(), []string{victimSrc}) {
		t.Fatalf("unreduced %v, want the victim's %s", r.GetUnreducedIds(), victimSrc)
	}
	for _, n := range nodes[:members-1] {
		getExact(t, c.of(n), target, want)
	}

	// The operator sees the re-plan on the coordinator's member.
	_, body = scrape(t, caller, "/metrics")
	if v := sample(body, "hoplite_allreduce_replans_total", ""); v != 1 {
		t.Errorf("%s: hoplite_allreduce_replans_total = %v, want 1", caller.id, v)
	}
	logged(t, caller, "allreduce lost a participant: re-planned as reduce-then-broadcast over the surviving sources",
		map[string]string{"node": victim.id})
}
