package member

// The AllReduce hang TestChaos's Reduce oracle found (chaos seeds 22 and
// 140 under -race): an AllReduce participant fails after the coordinator
// sent it a Get of the result. The repair puts the backup in its place
// and the new root finishes; the coordinator used to wait for the dead
// participant's Get (a Get to a dead node never answers) and never asked
// the backup's node, so the AllReduce waited for its deadline although 2
// of its 3 sources existed.

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

func TestAllReduceParticipantKilledBeforeItsGet(t *testing.T) {
	const chunk = 32 << 10
	var mu sync.Mutex
	victim := ""
	blocked, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := Config{exp: experiments.Set{ReduceDegree: 1}, Nodes: 4, ChunkSize: chunk} // a chain: leaf -> root
	cfg.hooks.Store.BeforeReceive = func(_ string, msg any) {
		if m, ok := msg.(*messages.ReduceTask); ok && m.GetRoot() && m.GetGeneration() == 1 {
			mu.Lock()
			victim = m.GetChildren()[0].GetNode().GetNodeId() // the leaf's node: a participant
			mu.Unlock()
		}
	}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		if _, ok := msg.(*messages.ReduceTaskStarted); ok {
			// The root started: the coordinator is about to send the
			// participants their Gets. Hold it until the leaf's node died.
			once.Do(func() {
				close(blocked)
				<-resume
			})
		}
	}
	l := start(t, cfg)
	// The coordinator must run on node-0, the caller, never on the
	// victim. Shard j is not always on node-j: a member that had to retry
	// its port under load joins as a new incarnation (node-1#1), which
	// moves the placement.
	target := idOwnedBy(t, l, 0, "all")
	ctx := deadline(t, 30*time.Second)
	data := map[string][]byte{}
	for i, id := range []string{"a", "b", "c"} {
		data[id] = int64s(uint64(i+1), chunk) // 256 KiB: a tree, not inline
		if err := l.Client(i+1).Put(ctx, id, data[id]); err != nil {
			t.Fatal(err)
		}
	}
	done := goReduce(ctx, 10*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).AllReduce(rctx, target, []string{"a", "b", "c"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	<-blocked
	mu.Lock()
	v := victim
	mu.Unlock()
	var i int
	if _, err := fmtSscanf(v, &i); err != nil {
		t.Fatalf("victim %q: %v", v, err)
	}
	if err := l.Kill(i); err != nil {
		close(resume)
		t.Fatal(err)
	}
	close(resume)
	res := <-done
	if res.err != nil {
		t.Fatalf("AllReduce with participant %s killed (the backup could replace it): %v", v, res.err)
	}
	// Each reduced source's node holds the exact result.
	where := map[string]int{"a": 1, "b": 2, "c": 3}
	want := make([]int64, chunk)
	for _, id := range res.reply.GetReducedIds() {
		// The killed node's source may be in the result: the first root
		// may have finished before the coordinator heard of the kill.
		for k := range want {
			want[k] += int64(leUint64(data[id][8*k:]))
		}
	}
	for _, id := range res.reply.GetReducedIds() {
		if where[id] == i {
			continue // no node, no copy
		}
		o := l.Store(where[id]).Lookup(target)
		if o == nil {
			t.Fatalf("node-%d held reduced source %s but has no copy of the result", where[id], id)
		}
		b, err := o.Bytes()
		if err != nil {
			t.Fatalf("node-%d's copy of the result: %v", where[id], err)
		}
		for k, w := range want {
			if g := int64(leUint64(b[8*k:])); g != w {
				t.Fatalf("node-%d: element %d = %d, want %d", where[id], k, g, w)
			}
		}
	}
}
func fmtSscanf(node string, i *int) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
	*i = n
	return n, err
}
