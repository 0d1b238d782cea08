package member

// The wrong Reduce results TestChaos's oracle found (chaos seeds 89 and
// 22, and soaks): a tree's root finished the target, and Gets read it
// whole and returned it before the coordinator took that root's report;
// then a repair moved the root (its member died, or its source's copy
// left the directory) and the Reduce answered with another generation's
// sources. A root now holds its target's last byte back until its
// coordinator commits that generation's result, so no Get returns a
// generation the Reduce does not answer with.

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

func TestReduceTargetIsReadableOnlyOnceItsCoordinatorTakesIt(t *testing.T) {
	const chunk = 32 << 10
	var lostOnce sync.Once
	rootDone := make(chan struct{})
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		if m, ok := msg.(*messages.ReduceTaskDone); ok && m.GetGeneration() == 1 && m.GetError() == nil {
			// The first root's report is lost, as it is when its member
			// dies right after sending it: the coordinator ignores a
			// report of another Reduce.
			lostOnce.Do(func() {
				m.ReduceId = "lost"
				close(rootDone)
			})
		}
	}
	l := start(t, cfg)
	// The coordinator runs on node-0, the caller, never on the victim.
	target := idOwnedBy(t, l, 0, "commit")
	ctx := deadline(t, 60*time.Second)
	a, b := int64s(1, chunk), int64s(2, chunk) // 256 KiB: a tree, not inline
	if err := l.Client(1).Put(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	done := goReduce(ctx, 40*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).Reduce(rctx, target, []string{"a", "b"}, 1, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	select {
	case <-rootDone:
	case r := <-done:
		t.Fatalf("the Reduce ended before its root reported: %v %v", r.reply, r.err)
	case <-ctx.Done():
		t.Fatal("the root never reported")
	}
	// The root on node-1 finished a's reduction, but the coordinator did
	// not take it: a Get streams all of it but the last byte, and waits.
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	got, err := l.Client(3).Get(gctx, target)
	cancel()
	if err == nil || bytes.Equal(got, a) {
		t.Fatalf("Get of a target its coordinator has not taken: %v (equal to a: %v), want no result", err, bytes.Equal(got, a))
	}
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("Get of a target its coordinator has not taken: %v, want TIMEOUT", err)
	}
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(2).Put(ctx, "b", b); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("Reduce after its root's member died: %v", res.err)
	}
	if ids := res.reply.GetReducedIds(); len(ids) != 1 || ids[0] != "b" {
		t.Fatalf("the reply names %v, want the repaired root's source b (plan %v)", ids, res.reply.GetPlan())
	}
	for _, i := range []int{0, 2, 3} {
		if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, b) {
			t.Fatalf("Get on node-%d after the Reduce: %v (equal to b: %v)", i, err, bytes.Equal(got, b))
		}
	}
}

// A sliced AllReduce's gathers hold their copies back in the same way
// until the coordinator has every gather's report: a participant whose
// own gather was done returned the full result from its node while
// another participant's report was still outstanding; that participant
// then died, and the AllReduce, re-planned over the survivors, answered
// with fewer sources than the bytes that Get returned.
func TestSlicedAllReduceCopiesAreReadableOnlyOnceItsCoordinatorTakesThem(t *testing.T) {
	const n = 32 << 10 // int64s: 256 KiB, above the inline limit
	var (
		mu      sync.Mutex
		gathers = map[int32]string{} // gather position -> node
		seen    int
		dropped = ""
	)
	allSeen := make(chan struct{})
	cfg := Config{exp: experiments.Set{AllReduceShape: "sliced"}, Nodes: 4}
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		tasks := []*messages.ReduceTask{}
		switch m := msg.(type) {
		case *messages.ReduceTask:
			tasks = append(tasks, m)
		case *messages.ReduceTaskBatch:
			tasks, _ = reduction.BatchTasks(m) // a ring's gathers are in its shares
		}
		mu.Lock()
		defer mu.Unlock()
		for _, tk := range tasks {
			if tk.GetGather() {
				gathers[tk.GetPosition()] = node
			}
		}
	}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		m, ok := msg.(*messages.ReduceTaskDone)
		if !ok || m.GetError() != nil || m.GetGeneration() != 1 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		node, gather := gathers[m.GetPosition()]
		if !gather {
			return
		}
		seen++
		if dropped == "" {
			// The first gather's report is lost, as when its member dies
			// right after sending it.
			dropped = node
			m.ReduceId = "lost"
		}
		if seen == 3 {
			close(allSeen)
		}
	}
	l := start(t, cfg)
	target := idOwnedBy(t, l, 3, "sliced-commit")
	ctx := deadline(t, 60*time.Second)
	var ids []string
	var data [][]byte
	for i := 0; i < 3; i++ {
		id := "s" + string(rune('0'+i))
		b := int64s(uint64(10+i), n)
		if err := l.Client(i).Put(ctx, id, b); err != nil {
			t.Fatal(err)
		}
		ids, data = append(ids, id), append(data, b)
	}
	done := goReduce(ctx, 40*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(3).AllReduce(rctx, target, ids, 3, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	select {
	case <-allSeen:
	case r := <-done:
		t.Fatalf("the AllReduce ended before every gather reported: %v %v", r.reply, r.err)
	case <-ctx.Done():
		t.Fatal("the gathers never reported")
	}
	mu.Lock()
	victim := dropped
	mu.Unlock()
	var v, other int
	if _, err := fmtSscanf(victim, &v); err != nil {
		t.Fatalf("node %q: %v", victim, err)
	}
	other = (v + 1) % 3
	// Every gather is done, but the coordinator has not taken the run:
	// a Get on a participant whose own copy is whole must not return it.
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	got, err := l.Client(other).Get(gctx, target)
	cancel()
	if err == nil {
		t.Fatalf("Get on node-%d of a run its coordinator has not taken returned %d bytes", other, len(got))
	}
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("Get on node-%d of a run its coordinator has not taken: %v, want TIMEOUT", other, err)
	}
	if err := l.Kill(v); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil {
		t.Fatalf("AllReduce after node-%d died: %v", v, res.err)
	}
	want := make([]byte, 8*n)
	var reduced [][]byte
	for _, id := range res.reply.GetReducedIds() {
		reduced = append(reduced, data[id[1]-'0'])
	}
	if len(reduced) != 2 {
		t.Fatalf("reduced %v, want the two survivors' sources", res.reply.GetReducedIds())
	}
	for k := range n {
		s := int64(leUint64(reduced[0][8*k:])) + int64(leUint64(reduced[1][8*k:]))
		for b := range 8 {
			want[8*k+b] = byte(uint64(s) >> (8 * b))
		}
	}
	for i := 0; i < 4; i++ {
		if i == v {
			continue
		}
		if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get on node-%d after the AllReduce: %v (the reduction of %v: %v)", i, err, res.reply.GetReducedIds(), bytes.Equal(got, want))
		}
	}
}
