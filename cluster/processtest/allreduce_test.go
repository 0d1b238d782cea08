package processtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
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
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-experiments", "allreduce-shape="+reduction.ShapeSliced, "-link-rate", "2gbit"))
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
	}{{"ar-all", 4, reduction.ShapeSliced}, {"ar-three", 3, reduction.ShapeDAry}} {
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
		if tc.shape != reduction.ShapeSliced {
			continue
		}
		// Four members, one source each: the all-gather goes around the
		// ring (every slice relayed member to member).
		if !r.GetPlan().GetRingGather() {
			t.Fatalf("AllReduce %s: plan %v: the all-gather did not go around the ring", tc.target, r.GetPlan())
		}
		// Each member sends the three slices it does not root in chains
		// to its successor, and its own slice and the two it relays
		// on, about 1.5·S = 6·elems bytes (slices are cut on elements):
		// all of it paced.
		for _, n := range nodes {
			_, body := scrape(t, n, "/metrics")
			if got, min := sample(body, "hoplite_data_plane_paced_bytes_total", ""), float64(5*elems); got < min {
				t.Errorf("%s sent %v paced bytes, want at least %v", n.slot.bind, got, min)
			}
		}
	}

	// Inline sources: the coordinator reduces them itself and pushes the
	// result with the participants' Gets. Every member reads it exact, and
	// after a Delete none still serves it (a pushed copy is recorded at
	// the target's shard, so the Delete reaches it).
	const small = 256
	var smallIDs []string
	for i, n := range nodes {
		id := fmt.Sprintf("ar-small-src-%d", i)
		data[id] = randomBytes(uint64(400+i), 4*small)
		putRetry(t, c.of(n), id, data[id])
		smallIDs = append(smallIDs, id)
	}
	want := make([]byte, 4*small)
	for _, id := range smallIDs {
		for k := 0; k < small; k++ {
			binary.LittleEndian.PutUint32(want[4*k:], binary.LittleEndian.Uint32(want[4*k:])+binary.LittleEndian.Uint32(data[id][4*k:]))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	r, err := c.of(nodes[1]).AllReduce(ctx, "ar-small", smallIDs, len(nodes), messages.ReduceOp_SUM, messages.DType_INT32)
	if err != nil || r.GetPlan().GetShape() != reduction.ShapeInline {
		t.Fatalf("inline AllReduce: %v (plan %v)", err, r.GetPlan())
	}
	for _, n := range nodes {
		getExact(t, c.of(n), "ar-small", want)
	}
	// Every participant but the one on the coordinator's member was
	// pushed the result on the data plane.
	pushed := 0.0
	for _, n := range nodes {
		_, body := scrape(t, n, "/metrics")
		pushed += sample(body, "hoplite_data_plane_pushes_total", `result="ok"`)
	}
	if pushed < float64(len(nodes)-1) {
		t.Errorf("%v pushes on the data plane answered ok, want at least %d", pushed, len(nodes)-1)
	}
	// A Reduce of sixteen inline sources, which hash to every member's
	// shards: its coordinator subscribes to those on other members on the
	// data plane, one SubscribeBatch per member, and their bytes come back
	// in the answers.
	subscribed := func() float64 {
		var sum float64
		for _, n := range nodes {
			_, body := scrape(t, n, "/metrics")
			sum += sample(body, "hoplite_data_plane_subscribes_total", `result="inline"`)
		}
		return sum
	}
	before := subscribed()
	var many []string
	wantMany := make([]byte, 4*small)
	for i := range 16 {
		id := fmt.Sprintf("r-small-src-%d", i)
		b := randomBytes(uint64(500+i), 4*small)
		putRetry(t, c.of(nodes[i%len(nodes)]), id, b)
		many = append(many, id)
		for k := 0; k < small; k++ {
			binary.LittleEndian.PutUint32(wantMany[4*k:], binary.LittleEndian.Uint32(wantMany[4*k:])+binary.LittleEndian.Uint32(b[4*k:]))
		}
	}
	if _, err := c.of(nodes[3]).Reduce(ctx, "r-small", many, len(many), messages.ReduceOp_SUM, messages.DType_INT32); err != nil {
		t.Fatalf("inline Reduce of %d sources: %v", len(many), err)
	}
	getExact(t, c.of(nodes[0]), "r-small", wantMany)
	// Sixteen sources on four shards' members: one batch to each of the
	// three other members (a resubscription, after half a second without
	// the sources, would add more).
	if n := subscribed() - before; n < 1 || n > float64(len(nodes)-1) {
		t.Errorf("%v SubscribeBatches answered inline on the data plane, want 1 to %d: one per other member", n, len(nodes)-1)
	}
	if err := c.of(nodes[2]).Delete(ctx, "ar-small"); err != nil {
		t.Fatalf("delete the inline AllReduce's result: %v", err)
	}
	for _, n := range nodes {
		if got, err := c.of(n).Get(ctx, "ar-small"); !errors.Is(err, messages.ErrDeleted) {
			t.Errorf("Get of the deleted result on %s: %d bytes, err %v; want DELETED", n.slot.bind, len(got), err)
		}
	}
}

// TestProcessSlicedAllReduceSurvivesAParticipant: four `hoplite node`
// members forced to slice AllReduces; one that is neither the caller nor
// the coordinator's member is SIGKILLed while the sliced run streams. The
// AllReduce succeeds, re-planned as reduce-then-broadcast (shape d-ary)
// over the three surviving sources (the victim held its source's only
// copy, which its shard reports lost), which are exactly its ReducedIds (the
// victim's is unreduced); every survivor Gets the exact sum of those
// three; the coordinator's member counts the re-plan on /metrics and logs
// it. -test-reduce-chunk-delay stretches the run (loopback reduces 2 MiB
// in milliseconds) so that the kill lands inside it; the shape of the
// reply proves it did.
func TestProcessSlicedAllReduceSurvivesAParticipant(t *testing.T) {
	allReduceSurvives(t, reduction.ShapeSliced, 4, 1)
}

// TestProcessAllReduceLowersNAtEveryFailure: five `hoplite node`
// members run an AllReduce of every source as a d-ary tree, which has no
// backup to repair with; two participants are SIGKILLed one after the
// other, each once the run it is in moves its bytes (the second in the
// tree the first failure re-planned). Each failure lowers n: the reply
// reduces exactly the three survivors' sources, every survivor Gets their
// exact sum, and the coordinator's member counted and logged two
// re-plans.
func TestProcessAllReduceLowersNAtEveryFailure(t *testing.T) {
	allReduceSurvives(t, reduction.ShapeDAry, 5, 2)
}

// allReduceSurvives runs an AllReduce of every source among members
// `hoplite node` processes forced to shape, and SIGKILLs the last kills
// members one after the other, the k-th once the coordinator's member has
// counted k re-plans and the victim has moved a chunk since (a chain
// position sends, a reducer receives). The caller's member runs the
// coordinator (it hosts the target's shard) and creates the target:
// losing it ends the AllReduce with UNAVAILABLE by design, so it is never
// a victim. Every id's shard is on the caller's member too, so no shard
// moves with a victim (TestProcessChaos covers that): the test is about
// the runs alone, the same on every run.
func allReduceSurvives(t *testing.T, shape string, members, kills int) {
	const (
		chunk = 32 << 10
		// Each chain position and gather waits this long per chunk: a
		// slice of 2 MiB / 4 is 17 chunks, so the sliced run lasts 0.85 s
		// at the very least, however idle the machine; the kill follows
		// its first chunk by a scrape. A tree (64 chunks) takes about 3 s.
		delay = "50ms"
		elems = 512<<10 + 3 // no slice boundary falls on a round number
	)
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, members)
	var nodes []*nodeProc
	for i := range slots {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-experiments", "allreduce-shape="+shape,
			"-chunk-size", strconv.Itoa(chunk), "-test-reduce-chunk-delay", delay))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	caller, victims, survivors := nodes[0], nodes[members-kills:], nodes[:members-kills]
	target := idOwnedBy(t, view, caller.id, "survive-"+shape)

	// Integer-valued float32s whose sums stay below 2^24: exact in any
	// order of association, so every shape gives the same bits.
	value := func(i, k int) float32 { return float32((k*(i+1) + 7*i) % 4096) }
	var sources []string
	for i, n := range nodes {
		id := idOwnedBy(t, view, caller.id, fmt.Sprintf("survive-%s-src%d", shape, i))
		b := make([]byte, 4*elems)
		for k := range elems {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(value(i, k)))
		}
		putRetry(t, c.of(n), id, b)
		sources = append(sources, id)
	}
	victimSrcs, survivorSrcs := sources[members-kills:], sources[:members-kills]
	want := make([]byte, 4*elems)
	for k := range elems {
		var s float32
		for i := range survivors {
			s += value(i, k)
		}
		binary.LittleEndian.PutUint32(want[4*k:], math.Float32bits(s))
	}

	moved := func(n *nodeProc) float64 {
		_, body := scrape(t, n, "/metrics")
		return sample(body, "hoplite_data_sent_bytes_total", "") + sample(body, "hoplite_data_received_bytes_total", "")
	}
	replans := func() float64 {
		_, body := scrape(t, caller, "/metrics")
		return sample(body, "hoplite_allreduce_replans_total", "")
	}
	before := moved(victims[0])
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

	for k, victim := range victims {
		// Run k is under way once the coordinator re-planned k times
		// and the victim moved a chunk of it.
		end := time.Now().Add(30 * time.Second)
		base := before
		for waiting := k > 0; ; {
			if waiting && replans() >= float64(k) {
				waiting, base = false, moved(victim)
			}
			if !waiting && moved(victim)-base >= chunk {
				break
			}
			select {
			case res := <-done:
				t.Fatalf("the AllReduce ended before run %d moved a chunk on %s: %v (shape %q)", k+1, victim.id, res.err, res.r.GetPlan().GetShape())
			case <-time.After(10 * time.Millisecond):
			}
			if time.Now().After(end) {
				t.Fatalf("%s moved no chunk of run %d within 30s", victim.id, k+1)
			}
		}
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.exited
	}
	res := <-done // bounded by the AllReduce's own deadline
	if res.err != nil {
		t.Fatalf("AllReduce with %d participants killed: %v", kills, res.err)
	}
	r := res.r
	if got := r.GetPlan().GetShape(); got != reduction.ShapeDAry {
		t.Fatalf("plan shape %q, want the re-planned %q (a sliced reply means the kill came after the run)", got, reduction.ShapeDAry)
	}
	reduced := slices.Sorted(slices.Values(r.GetReducedIds()))
	if !slices.Equal(reduced, slices.Sorted(slices.Values(survivorSrcs))) {
		t.Fatalf("reduced %v, want exactly the survivors' sources %v", r.GetReducedIds(), survivorSrcs)
	}
	if un := slices.Sorted(slices.Values(r.GetUnreducedIds())); !slices.Equal(un, slices.Sorted(slices.Values(victimSrcs))) {
		t.Fatalf("unreduced %v, want the victims' %v", r.GetUnreducedIds(), victimSrcs)
	}
	for _, n := range survivors {
		getExact(t, c.of(n), target, want)
	}

	// The operator sees every re-plan on the coordinator's member. A
	// tree re-plans when the victim's source is reported lost; a sliced
	// run also when the victim fails, if that comes first (the sliced run
	// becomes a tree of n, which the loss then lowers).
	most := kills
	if shape == reduction.ShapeSliced {
		most = 2 * kills
	}
	if v := replans(); v < float64(kills) || v > float64(most) {
		t.Errorf("%s: hoplite_allreduce_replans_total = %v, want %d to %d", caller.id, v, kills, most)
	}
	// Each re-plan names the victim, or, when its source's shard reported
	// the source lost before any location of it reached the coordinator,
	// the source alone (node "": nobody can tell whose it was).
	for k, victim := range victims {
		replanLogged(t, caller, victim.id, victimSrcs[k])
	}
}

// replanLogged waits for p's log of an AllReduce re-plan that lost src on
// node (or on no known node).
func replanLogged(t *testing.T, p *nodeProc, node, src string) {
	t.Helper()
	const msg = "allreduce lost a participant: re-planned as reduce-then-broadcast over the surviving sources"
	end := time.Now().Add(10 * time.Second)
	for {
		for _, e := range p.logs() {
			if e.str("msg") != msg {
				continue
			}
			lost, _ := e["lost"].([]any)
			if e.str("node") == node || e.str("node") == "" && slices.Contains(lost, any(src)) {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s never logged %q for node %s or its source %s", p.id, msg, node, src)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
