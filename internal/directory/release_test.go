package directory

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// rootComplete is a Reduce coordinator's commit of its root's result on
// node n: the target's copy there is whole.
func rootComplete(tb *LocationTable, id string, n int, size int64, reduceID string) []outbox.Send {
	return tb.onPublish(&messages.PublishLocation{ObjectId: id, Node: node(n), State: messages.LocationState_COMPLETE, Size: size,
		Creator: true, ReduceId: reduceID}).Sends
}

// reduceRoot reserves target "t" for reduce red#1 and registers its
// first root (generation 1, 1 MiB) on node creator.
func reduceRoot(t *testing.T, tb *LocationTable, creator int) {
	t.Helper()
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(creator), ReduceId: "red#1", ReduceGeneration: 1}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("the first root's create: %v", out)
	}
}

// A Reduce whose root finished the target before the Reduce failed (its
// caller's node died while the root's COMPLETE was on its way; chaos
// soak seed 91128695) releases the target: the root's worker drops it,
// and so must the shard. Keeping the root's record made a Get of the
// target on the root's node fail with "already holds", and sent Gets
// elsewhere to a copy that no longer exists.
func TestReleaseDropsAFinishedTargetOfAFailedReduce(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 2)
	locate(tb, "t", 3, t0) // a Get fetching from the root
	rootComplete(tb, "t", 2, 1<<20, "red#1")
	tb.onFetchDone(fetchDone(tb, "t", node(3), node(2)))
	out := tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"}).Sends
	for _, n := range []int{2, 3} {
		if d := dropsTo(out, n); d == nil || !errors.Is(d.GetReason(), messages.ErrNotFound) {
			t.Fatalf("release of the finished target: drop to n%d %v, want NOT_FOUND (out %v)", n, d, out)
		}
	}
	if out := locate(tb, "t", 2, t0); len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("a Get of the released target on the root's node: %v, want it to wait for a new producer", out)
	}
	// The id can be produced again.
	if _, err := tb.Reserve("t", "red#2"); err != nil {
		t.Fatalf("reserving the released target again: %v", err)
	}
}

// The root's COMPLETE can reach the shard after the failed Reduce's
// release dropped its partial copy (the release comes from the
// coordinator, the COMPLETE from the root's node). The root's node frees
// its copy (the release's drop, and its worker's own release): recording
// the COMPLETE left a copy that its node did not hold.
func TestLateCompleteOfAReleasedRootIsIgnored(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 2)
	locate(tb, "t", 4, t0) // a waiting Get keeps the entry
	tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"})
	rootComplete(tb, "t", 2, 1<<20, "red#1")
	if out := locate(tb, "t", 2, t0); len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("a Get on the released root's node after its late COMPLETE: %v, want it to wait", out)
	}
	if e := tb.entries["t"]; e != nil && (e.known || len(e.locs) > 0) {
		t.Fatalf("the released root's late COMPLETE was recorded: known %v, copies %v", e.known, e.locs)
	}

	// The same with no entry left (nobody waited).
	tb = NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("u", "red#1"); err != nil {
		t.Fatal(err)
	}
	tb.onCreate(&messages.CreateObject{ObjectId: "u", Size: 1 << 20, Creator: node(2), ReduceId: "red#1", ReduceGeneration: 1}, replyTo("c"))
	tb.onRelease(&messages.ReleaseTarget{TargetId: "u", ReduceId: "red#1"})
	rootComplete(tb, "u", 2, 1<<20, "red#1")
	if out := locate(tb, "u", 2, t0); len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("u: a Get on the released root's node after its late COMPLETE: %v, want it to wait", out)
	}

	// A root whose Reduce still holds the reservation finishes it.
	tb = NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("v", "red#1"); err != nil {
		t.Fatal(err)
	}
	tb.onCreate(&messages.CreateObject{ObjectId: "v", Size: 1 << 20, Creator: node(2), ReduceId: "red#1", ReduceGeneration: 1}, replyTo("c"))
	rootComplete(tb, "v", 2, 1<<20, "red#1")
	if r := locateReply(t, locate(tb, "v", 3, t0), replyTo("r3")); r.GetSender().GetNodeId() != "n2" || r.GetSenderState() != messages.LocationState_COMPLETE {
		t.Fatalf("v: a Get after the root finished: %v, want n2's complete copy", r)
	}
}
