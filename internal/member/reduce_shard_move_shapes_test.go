package member

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
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// An inline Reduce's (or AllReduce's) result is created at its target's
// shard by the node that stores it (StoreReduced), which asks the shard
// its own member's table names. If the shard moved back to a restarted
// member since the coordinator reserved the target at the old home, that
// store is refused UNAVAILABLE, and it is a shard move as for a tree's
// root (TestReduceWhoseRootCreatesAtTheShardsNewHomeStartsAgain): the
// caller's node starts the Reduce again at the shard's new home, and the
// caller gets the result instead of UNAVAILABLE.
//
// The first attempt's coordinator is held before it begins until node-4
// has restarted and the shard runs there again, so that every location
// and the store come after the move; the old home's shard is held in its
// stop until the Reduce answers, so that coordinator is the one that
// hears the store's refusal.
func TestInlineReduceWhoseResultIsStoredAtTheShardsNewHomeStartsAgain(t *testing.T) {
	t.Parallel()
	for _, all := range []bool{false, true} {
		name := "reduce"
		if all {
			name = "allreduce"
		}
		t.Run(name, func(t *testing.T) { createAtNewHome(t, all, reduction.ShapeInline) })
	}
}

// A sliced AllReduce's creator gather creates the target as a tree's
// root does, at the shard its member's table names: held until the shard
// runs on the restarted node-4 again, its creation is refused there, and
// the AllReduce starts again at the shard's new home.
func TestSlicedAllReduceWhoseCreatorGatherCreatesAtTheShardsNewHomeStartsAgain(t *testing.T) {
	t.Parallel()
	createAtNewHome(t, true, reduction.ShapeSliced)
}

// createAtNewHome runs a Reduce (an AllReduce if all) of two sources
// into a target whose shard moves back to the restarted node-4 between
// the reservation and the target's creation by the shape's creator: a
// tree's root (ShapeDAry), the inline result's store (ShapeInline), or
// the sliced run's creator gather (ShapeSliced).
func createAtNewHome(t *testing.T, all bool, shape string) {
	const nodes = 5
	elems, prefix := 16<<10, shape+"move" // 128 KiB sources: a tree, or sliced
	if shape == reduction.ShapeInline {
		elems = 128 // 1 KiB sources: reduced inline
	}
	target, shards := idOnNodeAcrossRestart(prefix, 4, nodes) // node-4 (and node-4#1) holds no source and is not the caller
	var (
		l         *Local
		armed     atomic.Bool // the first attempt's creation not held yet
		restarted = make(chan struct{})
		answered  = make(chan struct{})
		ansOnce   sync.Once
		oldShard  atomic.Value // the id of the shard on its home while node-4 is down
		heldStop  atomic.Bool
		created   = make(chan error, 1) // how the first attempt's creation ended
	)
	answer := func() { ansOnce.Do(func() { close(answered) }) }
	// hold waits until the restarted node-4 runs the shard again and
	// every member's table names it: the node that creates the target
	// may be any of them.
	hold := func() {
		select {
		case <-restarted:
		case <-answered:
		}
		end := time.Now().Add(10 * time.Second)
		for i := range nodes {
			for l.Member(i).ShardOwner(target) != l.Member(4).ID() && time.Now().Before(end) {
				time.Sleep(time.Millisecond)
			}
		}
	}
	cfg := Config{Nodes: nodes, Shards: shards, ChunkSize: 32 << 10}
	if shape != reduction.ShapeInline {
		if shape == reduction.ShapeSliced {
			cfg.exp.AllReduceShape = shape
		}
		// The creator: a sliced run's creator gather, or a tree's root.
		cfg.hooks.Store.AroundReduceOutput = func(_ string, task *messages.ReduceTask, create func() error) {
			creator := task.GetRoot() && task.GetGather() == (shape == reduction.ShapeSliced)
			if !creator || task.GetTargetId() != target || !armed.CompareAndSwap(true, false) {
				_ = create()
				return
			}
			hold()
			created <- create()
		}
	} else {
		cfg.hooks.Coordinator = func(_ string, msg any) {
			switch m := msg.(type) {
			case *actor.Started:
				// Before the coordinator begins: its locations, and so its
				// store, come after the move.
				if armed.CompareAndSwap(true, false) {
					hold()
				}
			case *messages.StoreReducedReply:
				select {
				case created <- messages.ErrOrNil(m.GetError()):
				default:
				}
			}
		}
	}
	cfg.hooks.Shard = func(shard string, msg any) {
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
	j := directory.ShardIndex(target, shards)
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
		if all {
			return l.Client(0).AllReduce(rctx, target, []string{"a", "b"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
		}
		return l.Client(0).Reduce(rctx, target, []string{"a", "b"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	eventually(t, 10*time.Second, "the first attempt held before it creates the target", func() bool { return !armed.Load() })
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
	case first = <-created:
	default:
	}
	if first == nil {
		t.Fatalf("the first attempt created the target at the shard's new home (%v, old home's stop held: %v): the scenario did not happen", res.err, heldStop.Load())
	}
	t.Logf("the first attempt's creation: %v (old home's stop held: %v)", first, heldStop.Load())
	if res.err != nil {
		t.Fatalf("%s whose target was created at the shard's new home: %v, want success (started again there)", shape, res.err)
	}
	if got := res.reply.GetPlan().GetShape(); got != shape {
		t.Fatalf("the answering attempt ran shape %q, want %q", got, shape)
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
