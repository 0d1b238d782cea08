package cluster

// The wrong Reduce result TestChaos's oracle found (chaos seed 89 in CI,
// and 91129516 in a soak): a Reduce of 1 of 5 sources; its root finished
// the target and Gets on two other members copied it; the root's member
// died before the coordinator took the root's report. The repair reduced
// another source into the same id, and the reply named that source while
// both Gets had returned the first root's bytes. The directory now seals
// a finished target with a surviving whole copy, and the coordinator
// takes the finished generation's result.

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func TestReduceKeepsAFinishedResultAGetReturned(t *testing.T) {
	const chunk = 32 << 10
	var lostOnce sync.Once
	rootDone := make(chan struct{})
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	cfg.CoordinatorHook = func(_ string, msg any) {
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
	target := idOwnedBy(t, l, 0, "sealed")
	ctx := deadline(t, 30*time.Second)
	a, b := int64s(1, chunk), int64s(2, chunk) // 256 KiB: a tree, not inline
	if err := l.Client(1).Put(ctx, "a", a); err != nil {
		t.Fatal(err)
	}
	done := goReduce(ctx, 20*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
		return l.Client(0).Reduce(rctx, target, []string{"a", "b"}, 1, messages.ReduceOp_SUM, messages.DType_INT64)
	})
	select {
	case <-rootDone:
	case r := <-done:
		t.Fatalf("the Reduce ended before its root reported: %v %v", r.reply, r.err)
	case <-ctx.Done():
		t.Fatal("the root never reported")
	}
	got, err := l.Client(3).Get(ctx, target)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("Get of the finished target on node-3: %v (equal to a: %v)", err, bytes.Equal(got, a))
	}
	// The directory records node-3's whole copy before the kill (a copy
	// whose report crosses the loss is dropped with it, and the target is
	// sealed as lost: directory's TestFinishedTargetLostWithAReaderIsSealed).
	for {
		info, err := l.Client(0).Info(ctx, target, false)
		if err != nil {
			t.Fatalf("Info of the target: %v", err)
		}
		whole := false
		for _, loc := range info.GetLocations() {
			whole = whole || loc.GetNode().GetNodeId() == l.Member(3).ID() && loc.GetState() == messages.LocationState_COMPLETE
		}
		if whole {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the directory never recorded node-3's copy: %v", info.GetLocations())
		case <-time.After(5 * time.Millisecond):
		}
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
	if ids := res.reply.GetReducedIds(); len(ids) != 1 || ids[0] != "a" {
		t.Fatalf("the reply names %v, but a Get returned the finished root's result, a (plan %v)", ids, res.reply.GetPlan())
	}
	for _, p := range res.reply.GetPlan().GetPositions() {
		if p.GetParent() < 0 && (p.GetNodeId() != l.Member(1).ID() || p.GetObjectId() != "a") {
			t.Fatalf("the reply's plan has its root at %s reducing %s, want the finished root: a on %s", p.GetNodeId(), p.GetObjectId(), l.Member(1).ID())
		}
	}
	for _, i := range []int{0, 2, 3} {
		if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, a) {
			t.Fatalf("Get on node-%d after the Reduce: %v (equal to a: %v)", i, err, bytes.Equal(got, a))
		}
	}
}
