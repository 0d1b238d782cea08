package cluster

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A Reduce's coordinator reserves its target in the target's shard, of
// which it is a child; the tree's root creates the target at the shard
// its own member's table names. If the shard moves in between (back to a
// restarted member), the root's CreateObject reaches a shard that holds
// no reservation for the Reduce, while the coordinator, with its shard
// on the old home, still runs: that is a shard move, and the caller's
// node starts the Reduce again at the shard's new home. Chaos seed 78
// under load: node-4 (the target's shard's home) was killed and
// restarted, the shard moved to node-0 and back, and the Reduce failed
// INVALID_ARGUMENT "object ... is not reserved for reduce ...".
//
// The first attempt's root holds its target's creation until node-4 has
// restarted and the shard runs there again; the old home's shard is
// held in its stop until the Reduce answers, so its coordinator is the
// one that hears the root's refusal.
func TestReduceWhoseRootCreatesAtTheShardsNewHomeStartsAgain(t *testing.T) {
	const (
		nodes = 5
		chunk = 32 << 10
		elems = 16 << 10 // 128 KiB sources: a tree, not inline
	)
	target := idOnNode("rootmove", 4, nodes, nodes) // node-4 holds no source and is not the caller
	var (
		l         *Local
		armed     atomic.Bool // the first attempt's root not seen yet
		restarted = make(chan struct{})
		answered  = make(chan struct{})
		ansOnce   sync.Once
		oldShard  atomic.Value // the id of the shard on its home while node-4 is down
		heldStop  atomic.Bool
		rootErr   = make(chan error, 1)
	)
	answer := func() { ansOnce.Do(func() { close(answered) }) }
	cfg := Config{Nodes: nodes, ChunkSize: chunk}
	cfg.Hooks.AroundReduceOutput = func(node string, task *messages.ReduceTask, create func() error) {
		if !task.GetRoot() || task.GetTargetId() != target || !armed.CompareAndSwap(true, false) {
			_ = create()
			return
		}
		// The first attempt's root: its member's table must name the
		// shard's new home on the restarted node-4 first.
		select {
		case <-restarted:
		case <-answered:
		}
		end := time.Now().Add(10 * time.Second)
		for l.Member(nodeIndexOf(node)).ShardOwner(target) != l.Member(4).ID() && time.Now().Before(end) {
			time.Sleep(time.Millisecond)
		}
		rootErr <- create()
	}
	cfg.ShardHook = func(shard string, msg any) {
		if _, ok := msg.(*actor.Stopping); ok && shard == oldShard.Load() {
			// The old home keeps running (and its coordinator with it)
			// until the Reduce answered.
			heldStop.Store(true)
			select {
			case <-answered:
			case <-time.After(20 * time.Second):
			}
		}
	}
	l = start(t, cfg)
	t.Cleanup(answer) // before Stop (cleanups run last first)
	ctx := deadline(t, 60*time.Second)
	j := directory.ShardIndex(target, nodes)
	shardHost := func() int { return l.NodeOf(l.Shard(j).GetAddress()) }
	if host := shardHost(); host != 4 {
		t.Fatalf("target's shard is on node %d, want node-4", host)
	}
	if err := l.Kill(4); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the target's shard on another member", func() bool { h := shardHost(); return h >= 0 && h != 4 })
	oldShard.Store(l.Shard(j).GetId())
	data := map[string][]byte{"a": int64s(7919, elems), "b": int64s(2*7919, elems)}
	for i, id := range []string{"a", "b"} {
		if err := l.Client(i+1).Put(ctx, id, data[id]); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
	}
	armed.Store(true)
	done := goReduce(ctx, 30*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).Reduce(rctx, target, []string{"a", "b"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	eventually(t, 10*time.Second, "the first attempt's root waiting to create the target", func() bool { return !armed.Load() })
	if err := l.Restart(4); err != nil {
		answer()
		t.Fatal(err)
	}
	if host := shardHost(); host != 4 {
		answer()
		t.Fatalf("after the restart the target's shard is on node %d, want node-4", host)
	}
	close(restarted)
	var res reduceResult
	select {
	case res = <-done:
	case <-ctx.Done():
		t.Fatal("the Reduce did not answer")
	}
	answer()
	var first error
	select {
	case first = <-rootErr:
	default:
	}
	if first == nil {
		t.Fatalf("the first attempt's root created the target at the shard's new home (%v, old home's stop held: %v): the scenario did not happen", res.err, heldStop.Load())
	}
	t.Logf("the first attempt's root: %v (old home's stop held: %v)", first, heldStop.Load())
	if res.err != nil {
		t.Fatalf("Reduce whose root created its target at the shard's new home: %v, want success (started again there)", res.err)
	}
	if red := slices.Sorted(slices.Values(res.reply.GetReducedIds())); !slices.Equal(red, []string{"a", "b"}) {
		t.Fatalf("reduced %v, want a and b", red)
	}
	got, err := l.Client(3).Get(ctx, target)
	if err != nil {
		t.Fatalf("get target: %v", err)
	}
	if want := chaosReduceBytes(messages.ReduceOp_SUM, [][]byte{data["a"], data["b"]}); !bytes.Equal(got, want) {
		t.Fatal("the target is not a+b")
	}
}
