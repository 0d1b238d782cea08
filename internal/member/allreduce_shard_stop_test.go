package member

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// An AllReduce's coordinator commits the root's result before its
// participants have fetched it, and answers only once they have: in
// between, readers get the committed target whole. A coordinator that
// stops with its directory shard in that window (the shard moves back to
// a restarted member, or restarts) must leave that result in place: the
// caller's node starts the call again at the shard's home, and the next
// attempt must answer with the committed result, not reduce again. Chaos
// seed 78 under load: the shard moved back to a restarted node-4, the
// stopping coordinator released the committed target (the old shard
// dropped a reader's copy), the next attempt reduced other sources, and
// a Get had returned the first attempt's result. Before the fix, "move"
// failed 20 runs of 20 here: the AllReduce answered a and c, or the
// target was LOST.
//
// Sources a (node-1) and b (node-2) exist; the participant's Get of the
// result is held, so the first attempt cannot answer; a reader on node-3
// gets the committed a+b; then c is Put and b deleted (an attempt that
// reduced again would reduce a and c), and the target's shard crashes
// ("crash": it restarts, rebuilt) or moves back to node-4 ("move": the
// Reduce ran on the member the shard moved to when node-4 was killed),
// taking the coordinator with it.
func TestAllReduceStoppedWithItsShardAfterTheCommitKeepsTheResult(t *testing.T) {
	for _, how := range []string{"crash", "move"} {
		t.Run(how, func(t *testing.T) { runAllReduceShardStop(t, how) })
	}
}

func runAllReduceShardStop(t *testing.T, how string) {
	const (
		nodes = 5
		chunk = 32 << 10
		elems = 16 << 10 // 128 KiB sources: a tree, not inline
	)
	target, shards := idOnNodeAcrossRestart("arshard", 4, nodes) // node-4 (and node-4#1) holds no source and is not the caller
	var (
		held     atomic.Bool // hold the participants' Gets of the result
		hold     = make(chan struct{})
		holdOnce sync.Once
		stopped  = make(chan struct{})
		stopOnce sync.Once
		coords   sync.Map // reduce ids of the coordinators that ran
	)
	unhold := func() { holdOnce.Do(func() { close(hold) }) }
	cfg := Config{exp: experiments.Set{AllReduceShape: "d-ary"}, Nodes: nodes, Shards: shards, ChunkSize: chunk, hooks: testhooks.Set{Shard: chaosCrashHook}}
	cfg.hooks.Coordinator = func(reduce string, msg any) {
		switch msg.(type) {
		case *actor.Started:
			coords.Store(reduce, true)
		case *actor.Stopping:
			stopOnce.Do(func() { close(stopped) })
		}
	}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		// The participants (the sources' nodes) fetch the result; the
		// reader on node-3 does not wait.
		if id == target && held.Load() && (nodeIndexOf(node) == 1 || nodeIndexOf(node) == 2) {
			<-hold
		}
	}
	l := start(t, cfg)
	t.Cleanup(unhold) // before Stop (cleanups run last first)
	ctx := deadline(t, 60*time.Second)
	shardHost := func() int { return l.NodeOf(l.Shard(directory.ShardIndex(target, shards)).GetAddress()) }
	if host := shardHost(); host != 4 {
		t.Fatalf("target's shard is on node %d, want node-4", host)
	}
	if how == "move" {
		// The shard moves to another member now, and back to node-4
		// when it restarts (below).
		if err := l.Kill(4); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the target's shard on another member", func() bool { h := shardHost(); return h >= 0 && h != 4 })
	}
	ids := []string{"a", "b", "c"}
	data := map[string][]byte{}
	for i, id := range ids {
		data[id] = int64s(uint64(i+1)*7919, elems)
	}
	for i, id := range ids[:2] {
		if err := l.Client(i+1).Put(ctx, id, data[id]); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	held.Store(true)
	done := goReduce(ctx, 30*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).AllReduce(rctx, target, ids, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	// The reader's Get returns only once the coordinator committed the
	// root's result (the root holds its last byte back until then).
	gctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	read, err := l.Client(3).Get(gctx, target)
	cancel()
	if err != nil {
		t.Fatalf("get target while the AllReduce runs: %v", err)
	}
	if want := chaosReduceBytes(messages.ReduceOp_SUM, [][]byte{data["a"], data["b"]}); !bytes.Equal(read, want) {
		t.Fatal("the target read while the AllReduce runs is not a+b")
	}
	select {
	case r := <-done:
		t.Fatalf("the AllReduce answered (%v, %v) while its participants' Gets were held", r.reply.GetReducedIds(), r.err)
	default:
	}
	// c exists from now on, and b goes: an attempt that reduced again
	// would reduce a and c.
	if err := l.Client(3).Put(ctx, "c", data["c"]); err != nil {
		t.Fatalf("put c: %v", err)
	}
	if err := l.Client(0).Delete(ctx, "b"); err != nil {
		t.Fatalf("delete b: %v", err)
	}
	if how == "move" {
		if err := l.Restart(4); err != nil {
			t.Fatal(err)
		}
	} else {
		sendIn(l, l.Shard(directory.ShardIndex(target, shards)), chaosCrash{})
	}
	select {
	case <-stopped: // the first attempt's coordinator stops with its shard
	case <-ctx.Done():
		t.Fatal("the coordinator did not stop when its shard crashed")
	}
	held.Store(false)
	unhold()
	var res reduceResult
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the AllReduce did not answer")
	}
	var runs []string
	coords.Range(func(k, _ any) bool { runs = append(runs, k.(string)); return true })
	if res.err != nil {
		t.Fatalf("AllReduce whose coordinator stopped with its shard after the commit: %v, want success (coordinators %v)", res.err, runs)
	}
	red := slices.Sorted(slices.Values(res.reply.GetReducedIds()))
	if !slices.Equal(red, []string{"a", "b"}) {
		t.Fatalf("the AllReduce answered that it reduced %v, but a reader got the committed a+b (coordinators %v)", red, runs)
	}
	got, err := l.Client(0).Get(ctx, target)
	if err != nil {
		t.Fatalf("get target after the AllReduce: %v", err)
	}
	if !bytes.Equal(got, read) {
		t.Fatal("the target after the AllReduce is not what a reader got while it ran")
	}
}
