package member

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// storeCrash makes a store node's BeforeReceive hook panic.
type storeCrash struct{}

// A crash of a store node actor while its node holds a running tree
// position restarts the actor, not the node: its store keeps the bytes,
// and the reduce worker goes on, so the Reduce completes with the exact
// result. (Workers were the store node's children: the restart stopped
// them silently and the coordinator waited for the position until the
// Reduce's deadline — chaos seed 67.)
func TestReduceSurvivesAStoreNodeCrash(t *testing.T) {
	const n = 32 << 10 // int64s: 256 KiB sources, a tree, not inline
	var (
		once     sync.Once
		mu       sync.Mutex
		rootNode string
		rootPos  = int32(-1)
	)
	started := make(chan string, 1)
	cfg := Config{exp: experiments.Set{ReduceDegree: 1}, Nodes: 3, ChunkSize: 16 << 10, LinkBandwidth: 1 << 20} // a chain; 256 KiB take 250 ms a link
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		switch m := msg.(type) {
		case storeCrash:
			panic("test: store node crash")
		case *messages.ReduceTask:
			if m.GetRoot() {
				mu.Lock()
				rootNode, rootPos = node, m.GetPosition()
				mu.Unlock()
			}
		}
	}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		if m, ok := msg.(*messages.ReduceTaskStarted); ok && m.GetError() == nil {
			mu.Lock()
			node, root := rootNode, m.GetPosition() == rootPos
			mu.Unlock()
			if root {
				once.Do(func() { started <- node })
			}
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 60*time.Second)
	data := map[string][]byte{"a": int64s(1, n), "b": int64s(2, n)}
	if err := l.Client(1).Put(ctx, "a", data["a"]); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(2).Put(ctx, "b", data["b"]); err != nil {
		t.Fatal(err)
	}
	done := goReduce(ctx, 10*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).Reduce(rctx, "sum", []string{"a", "b"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	var node string
	select {
	case node = <-started:
	case res := <-done:
		t.Fatalf("the Reduce ended before any position started: %v", res.err)
	}
	var i int
	if _, err := fmtSscanf(node, &i); err != nil {
		t.Fatalf("node %q: %v", node, err)
	}
	sendIn(l, l.StoreNode(i), storeCrash{})
	t0 := time.Now()
	res := <-done
	t.Logf("crashed node-%d; the Reduce ended %v later: %v", i, time.Since(t0), res.err)
	if res.err != nil {
		t.Fatalf("Reduce with node-%d's store node actor crashed mid-run: %v", i, res.err)
	}
	got, err := l.Client(0).Get(ctx, "sum")
	if err != nil {
		t.Fatal(err)
	}
	for k := range n {
		want := int64(leUint64(data["a"][8*k:])) + int64(leUint64(data["b"][8*k:]))
		if g := int64(leUint64(got[8*k:])); g != want {
			t.Fatalf("element %d = %d, want %d", k, g, want)
		}
	}
}
