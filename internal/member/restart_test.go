package member

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// crash is a message that makes the store node's BeforeReceive hook panic.
type crash struct{}

func crashHook(node string, msg any) {
	if _, ok := msg.(crash); ok {
		panic(fmt.Sprintf("injected crash of %s's store node", node))
	}
}

func TestStoreNodeRestartUnderLoadLosesNoPinnedObject(t *testing.T) {
	const chunk = 64 << 10
	var gate atomic.Bool // when set, node-2 stalls its fetch of "big" mid-way
	stalled := make(chan struct{}, 1)
	release := make(chan struct{})
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	var node2Starts atomic.Int32
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		if _, ok := msg.(*actor.Started); ok && node == "node-2" {
			node2Starts.Add(1)
		}
		crashHook(node, msg)
	}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-2" && id == "big" && off == 8*chunk && gate.CompareAndSwap(true, false) {
			stalled <- struct{}{}
			<-release
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 60*time.Second)

	var restarts atomic.Int32
	sub := l.System().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok && e.Directive == actor.RestartDirective {
			restarts.Add(1)
		}
	})
	defer l.System().EventStream.Unsubscribe(sub)

	objs := map[string][]byte{}
	for i := range 12 {
		id := fmt.Sprintf("pinned-%d", i)
		objs[id] = randomBytes(uint64(100+i), (i+1)*100<<10)
		if err := l.Client(1).Put(ctx, id, objs[id]); err != nil {
			t.Fatal(err)
		}
	}
	objs["big"] = randomBytes(99, 40*chunk)
	if err := l.Client(1).Put(ctx, "big", objs["big"]); err != nil {
		t.Fatal(err)
	}

	// Load: Gets of every pinned object from the other nodes while the
	// creator's store node crashes twice.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, reader := range []int{0, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id, want := range objs {
				if id == "big" {
					continue
				}
				got, err := l.Client(reader).Get(ctx, id)
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("node-%d got wrong bytes for %s", reader, id)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	sendIn(l, l.StoreNode(1), crash{})
	// A receiver crashes mid-fetch: its session is stopped with it, and the
	// restarted node resumes from the bytes it already has.
	gate.Store(true)
	got := make(chan error, 1)
	go func() {
		b, err := l.Client(2).Get(ctx, "big")
		if err == nil && !bytes.Equal(b, objs["big"]) {
			err = fmt.Errorf("node-2 got wrong bytes for big after its restart")
		}
		got <- err
	}()
	<-stalled
	sendIn(l, l.StoreNode(2), crash{})
	// A second Started means the restart is done (the restarted node
	// resumes the copy from the bytes it has).
	eventually(t, 10*time.Second, "node-2's store node restarted", func() bool { return node2Starts.Load() >= 2 })
	close(release)
	sendIn(l, l.StoreNode(1), crash{})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// The shard saw node-2 locate again after its restart: its first
	// transfer was cut short and a second one finished the copy.
	info := settledInfo(t, ctx, l.Client(0), "big")
	var aborted, finished int
	for _, tr := range info.GetTransfers() {
		if tr.GetReceiver() == "node-2" {
			if tr.GetAborted() {
				aborted++
			} else if tr.GetEndSeq() != 0 {
				finished++
			}
		}
	}
	if aborted != 1 || finished != 1 {
		t.Fatalf("node-2 transfers: %d aborted, %d finished; want 1 and 1 (resumed fetch): %v", aborted, finished, info.GetTransfers())
	}
	eventually(t, 10*time.Second, "three supervisor restarts published", func() bool { return restarts.Load() >= 3 })
	// After the restarts every pinned object is still whole on its creator.
	for id, want := range objs {
		o := l.Store(1).Lookup(id)
		if o == nil || !o.Pinned() {
			t.Fatalf("%s lost its pinned creator copy", id)
		}
		if got, err := l.Client(1).Get(ctx, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after restarts: %v", id, err)
		}
	}
}

// TestCompletedReduceResultSurvivesRestarts: a Reduce that finished keeps
// its result through a crash of the store node actor that holds the
// target (the tree's root) and of the target's directory shard, with Gets
// of the target in flight while both restart.
func TestCompletedReduceResultSurvivesRestarts(t *testing.T) {
	const nodes = 4
	cfg := Config{Nodes: nodes, ChunkSize: 32 << 10, hooks: testhooks.Set{Shard: shardCrashHook}}
	var rootStarts atomic.Int32
	var root atomic.Value // node id of the root, once known
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		if _, ok := msg.(*actor.Started); ok && root.Load() == node {
			rootStarts.Add(1)
		}
		crashHook(node, msg)
	}
	l := start(t, cfg)
	evs := recordEvents(t, l)
	ctx := deadline(t, 30*time.Second)
	var ids []string
	var inputs [][]byte
	for i := range nodes {
		id := fmt.Sprintf("s%d", i)
		ids = append(ids, id)
		inputs = append(inputs, int64s(uint64(i+1), 32<<10))
		if err := l.Client(i).Put(ctx, id, inputs[i]); err != nil {
			t.Fatal(err)
		}
	}
	want := chaosReduceBytes(messages.ReduceOp_SUM, inputs)
	rep, err := l.Client(0).Reduce(ctx, "sum", ids, nodes, messages.ReduceOp_SUM, messages.DType_INT64)
	if err != nil {
		t.Fatal(err)
	}
	ri := -1
	for _, p := range rep.GetPlan().GetPositions() {
		if p.GetParent() < 0 {
			if _, err := fmt.Sscanf(p.GetNodeId(), "node-%d", &ri); err != nil {
				t.Fatalf("root on %q: %v", p.GetNodeId(), err)
			}
		}
	}
	if ri < 0 || l.Store(ri).Lookup("sum") == nil {
		t.Fatalf("no root holding the target in plan %v", rep.GetPlan())
	}
	root.Store(l.Node(ri).GetNodeId())
	shard := directory.ShardIndex("sum", nodes)

	// Gets from the other nodes race with both restarts.
	var wg sync.WaitGroup
	errs := make(chan error, nodes)
	for n := range nodes {
		if n == ri {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := l.Client(n).Get(ctx, "sum")
			if err == nil && !bytes.Equal(got, want) {
				err = fmt.Errorf("node-%d got other bytes than the sum", n)
			}
			if err != nil {
				errs <- fmt.Errorf("get on node-%d during the restarts: %w", n, err)
			}
		}()
	}
	sendIn(l, l.StoreNode(ri), crash{})
	sendIn(l, l.Shard(shard), crashShard{})
	eventually(t, 10*time.Second, "the root's store node restarted", func() bool { return rootStarts.Load() >= 1 })
	eventually(t, 10*time.Second, "the target's shard rebuilt", func() bool {
		for _, e := range eventsOf[*events.ShardRebuilt](evs) {
			if e.Shard == l.Member(l.NodeOf(l.Shard(shard).GetAddress())).ID()+"/"+shardName(shard) {
				return true
			}
		}
		return false
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if o := l.Store(ri).Lookup("sum"); o == nil || !o.Pinned() {
		t.Fatal("the root lost its pinned copy of the target")
	}
	// After both restarts, on every node: the directory was rebuilt from
	// the copies the store nodes republished.
	for n := range nodes {
		got, err := l.Client(n).Get(ctx, "sum")
		if err != nil {
			t.Fatalf("get on node-%d after the restarts: %v", n, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("node-%d: the target is not the sum after the restarts", n)
		}
	}
	info, err := l.Client(0).Info(ctx, "sum", false)
	if err != nil {
		t.Fatalf("the rebuilt shard does not know the target: %v", err)
	}
	if info.GetSize() != int64(len(want)) {
		t.Fatalf("the rebuilt shard says the target has %d bytes, want %d", info.GetSize(), len(want))
	}
}
