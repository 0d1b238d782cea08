package member

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// eventLog records the domain events a cluster publishes.
type eventLog struct {
	mu  sync.Mutex
	all []any
}

func recordEvents(t *testing.T, l *Local) *eventLog { return recordEventsOf(t, l.System()) }

// recordEventsOf records the domain events published on sys.
func recordEventsOf(t *testing.T, sys *actor.ActorSystem) *eventLog {
	log := &eventLog{}
	sub := sys.EventStream.Subscribe(func(e any) {
		switch e.(type) {
		case *events.NodeFailed, *events.SenderSwitched, *events.TreeNodeReplaced,
			*events.AncestorsInvalidated, *events.ShardRebuilt, *events.ReduceDone:
			log.mu.Lock()
			log.all = append(log.all, e)
			log.mu.Unlock()
		}
	})
	t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })
	return log
}

func eventsOf[T any](log *eventLog) []T {
	log.mu.Lock()
	defer log.mu.Unlock()
	var out []T
	for _, e := range log.all {
		if v, ok := e.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// TestFigure4BroadcastFailover is thesis Figure 2.4 c'/d': S sends to R1,
// R2 fetches from R1's partial copy, R1 fails. R2 resumes from S at its
// offset (only the missing bytes move); R3 then fetches from R2, never
// from a node downstream of itself. R1 comes back empty and rejoins.
func TestFigure4BroadcastFailover(t *testing.T) {
	const chunk = 64 << 10
	const chunks = 40
	never := make(chan struct{}) // node-1 is killed while it waits here
	t.Cleanup(func() { close(never) })
	r1Stalled, r2Stalled := make(chan struct{}, 1), make(chan struct{}, 1)
	releaseR2 := make(chan struct{})
	var mu sync.Mutex
	var r1Once sync.Once
	r2Offsets := map[int64]int{}
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		switch node {
		case "node-1":
			if off == 10*chunk {
				stall := false
				r1Once.Do(func() { stall = true }) // not the rejoined R1
				if stall {
					r1Stalled <- struct{}{}
					<-never
				}
			}
		case "node-2":
			mu.Lock()
			r2Offsets[off]++
			mu.Unlock()
			if off == 20*chunk {
				r2Stalled <- struct{}{}
				<-releaseR2
			}
		}
	}
	l := start(t, cfg)
	evs := recordEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(40, chunks*chunk)
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	get := func(node int) chan error {
		done := make(chan error, 1)
		go func() {
			b, err := l.Client(node).Get(ctx, "x")
			if err == nil && !bytes.Equal(b, data) {
				err = fmt.Errorf("node-%d got wrong bytes", node)
			}
			done <- err
		}()
		return done
	}
	senders := func() map[string]string {
		info, err := l.Client(0).Info(ctx, "x", false)
		if err != nil {
			t.Fatal(err)
		}
		return senderOf(info)
	}

	get(1) // R1's Get fails with its node; nobody waits for it
	<-r1Stalled
	r2 := get(2)
	eventually(t, 5*time.Second, "R2 fetching from R1's partial copy", func() bool { return senders()["node-2"] == "node-1" })
	eventually(t, 5*time.Second, "R2 to hold all R1 has", func() bool {
		o := l.Store(2).Lookup("x")
		w, _, _ := o.Progress()
		return w == 10*chunk
	})
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	<-r2Stalled // R2 resumed from S and holds 20 chunks
	if s := senders()["node-2"]; s != "node-0" {
		t.Fatalf("after R1 failed, R2 fetches from %s, want node-0 (c')", s)
	}
	r3 := get(3)
	eventually(t, 5*time.Second, "R3 to get a sender", func() bool { return senders()["node-3"] != "" })
	if s := senders()["node-3"]; s != "node-2" {
		t.Fatalf("R3 fetches from %s, want node-2's partial copy (d')", s)
	}
	close(releaseR2)
	for _, c := range []chan error{r2, r3} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	// Only the missing bytes moved again: R2 stored each chunk once.
	mu.Lock()
	if len(r2Offsets) != chunks {
		t.Fatalf("R2 stored %d distinct chunks, want %d", len(r2Offsets), chunks)
	}
	for off, n := range r2Offsets {
		if n != 1 {
			t.Fatalf("R2 stored the chunk at %d %d times", off, n)
		}
	}
	mu.Unlock()
	sw := eventsOf[*events.SenderSwitched](evs)
	if len(sw) != 1 || sw[0].Receiver != "node-2" || sw[0].From != "node-1" || sw[0].To != "node-0" || sw[0].Offset != 10*chunk {
		for _, e := range sw {
			t.Logf("%+v", *e)
		}
		t.Fatalf("SenderSwitched events, want one node-2 node-1→node-0 at %d", 10*chunk)
	}
	if nf := eventsOf[*events.NodeFailed](evs); len(nf) != 1 || nf[0].Node != "node-1" {
		t.Fatalf("NodeFailed events %+v", nf)
	}
	// R1 comes back empty and rejoins with a plain Get.
	if err := l.Restart(1); err != nil {
		t.Fatal(err)
	}
	if err := <-get(1); err != nil {
		t.Fatalf("rejoined R1: %v", err)
	}
}

// TestFigure5ReduceRepair is thesis Figure 2.5b: reduce 6 of 10 on a
// binary tree; R1..R6 arrive and are placed, R7 arrives as a backup, R2
// fails. R7 takes R2's position, R2's ancestors (the root R4) clear and
// pull again, the other subtree (R5, R6) does not, and the result is
// exactly R1+R7+R3+R4+R5+R6.
func TestFigure5ReduceRepair(t *testing.T) {
	const chunk = 64 << 10
	holdR6 := make(chan struct{})
	cfg := Config{exp: experiments.Set{ReduceDegree: 2}, Nodes: 10, ChunkSize: chunk}
	cfg.hooks.Store.BeforePutChunk = func(node, id string, off int64) {
		if id == "R6" && off > 0 {
			<-holdR6 // the tree cannot finish before R2 fails
		}
	}
	// What the shards and the coordinator have received, to order the
	// steps by messages rather than by sleeps.
	var mu sync.Mutex
	subscribed, located := map[string]bool{}, map[string]bool{}
	cfg.hooks.Shard = func(_ string, msg any) {
		if m, ok := msg.(*messages.Subscribe); ok {
			mu.Lock()
			subscribed[m.GetObjectId()] = true
			mu.Unlock()
		}
	}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		if m, ok := msg.(*messages.LocationUpdate); ok && m.GetNode() != nil {
			mu.Lock()
			located[m.GetObjectId()] = true
			mu.Unlock()
		}
	}
	seen := func(set map[string]bool, id string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return set[id]
		}
	}
	l := start(t, cfg)
	evs := recordEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	var ids []string
	data := map[string][]byte{}
	for i := 1; i <= 10; i++ {
		id := fmt.Sprintf("R%d", i)
		ids = append(ids, id)
		data[id] = int64s(uint64(i), 4*chunk/8)
	}
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Client(0).Reduce(ctx, "sum", ids, 6, messages.ReduceOp_SUM, messages.DType_INT64)
		done <- result{r, err}
	}()
	// The coordinator subscribes first: every arrival is pushed to it as
	// it happens (a hook runs as its actor takes the message, so a Put
	// after it is registered after the Subscribe).
	for _, id := range ids {
		eventually(t, 5*time.Second, "the coordinator's subscription to "+id, seen(subscribed, id))
	}
	r6put := make(chan error, 1)
	for i := 1; i <= 7; i++ {
		id := fmt.Sprintf("R%d", i)
		if i == 6 {
			go func() { r6put <- l.Client(i-1).Put(ctx, id, data[id]) }()
		} else if err := l.Client(i-1).Put(ctx, id, data[id]); err != nil {
			// Node i-1 holds Ri; node-0 is the caller and holds R1.
			t.Fatal(err)
		}
		// Arrival order is Put order. For R7 this also means the
		// coordinator has it as a backup before R2 fails: the hook runs
		// as the coordinator takes R7's location, so the Terminated of
		// node-1 comes after.
		eventually(t, 5*time.Second, id+" to reach the coordinator", seen(located, id))
	}
	if err := l.Kill(1); err != nil { // node-1 holds R2
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "R2 to be replaced", func() bool { return len(eventsOf[*events.TreeNodeReplaced](evs)) > 0 })
	close(holdR6)
	if err := <-r6put; err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatal(res.err)
	}
	want := []string{"R1", "R7", "R3", "R4", "R5", "R6"} // position order
	if !slices.Equal(res.r.GetReducedIds(), want) {
		t.Fatalf("reduced %v, want %v", res.r.GetReducedIds(), want)
	}
	rep := eventsOf[*events.TreeNodeReplaced](evs)
	if len(rep) != 1 || rep[0].Position != 1 || rep[0].Failed != "R2" || rep[0].Replacement != "R7" {
		t.Fatalf("TreeNodeReplaced %+v, want position 1: R2 → R7", rep)
	}
	inv := eventsOf[*events.AncestorsInvalidated](evs)
	if len(inv) != 1 || !slices.Equal(inv[0].Positions, []int{3}) {
		t.Fatalf("AncestorsInvalidated %+v, want exactly the root (position 3): the R5/R6 subtree keeps its progress", inv)
	}
	got, err := l.Client(9).Get(ctx, "sum")
	if err != nil {
		t.Fatal(err)
	}
	wantSum := make([]int64, 4*chunk/8)
	for _, id := range want {
		for k := range wantSum {
			wantSum[k] += int64(leUint64(data[id][8*k:]))
		}
	}
	for k, w := range wantSum {
		if g := int64(leUint64(got[8*k:])); g != w {
			t.Fatalf("element %d = %d, want %d", k, g, w)
		}
	}
	if d := eventsOf[*events.ReduceDone](evs); len(d) != 1 || d[0].Err != nil {
		t.Fatalf("ReduceDone %+v", d)
	}
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// int64s is n little-endian int64s small enough that sums never overflow.
func int64s(seed uint64, n int) []byte {
	b := randomBytes(seed, n*8)
	for i := 0; i < n; i++ {
		v := int64(leUint64(b[i*8:])) >> 20
		for k := 0; k < 8; k++ {
			b[i*8+k] = byte(uint64(v) >> (8 * k))
		}
	}
	return b
}
