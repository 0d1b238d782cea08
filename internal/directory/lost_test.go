package directory

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

func complete(tb *LocationTable, id string, n int, size int64, creator bool) []outbox.Send {
	return tb.onPublish(&messages.PublishLocation{ObjectId: id, Node: node(n), State: messages.LocationState_COMPLETE, Size: size, Creator: creator}).Sends
}

func dropsTo(out []outbox.Send, n int) *messages.DropObject {
	for _, s := range out {
		if ref, ok := s.To.(*messages.NodeRef); ok && ref.GetNodeId() == node(n).GetNodeId() {
			if d, ok := s.Msg.(*messages.DropObject); ok {
				return d
			}
		}
	}
	return nil
}

// An object whose every complete copy died is LOST once no partial copy
// may be whole (the receivers fed from it located again): Locates fail
// fast, partial copies (which can never complete) are dropped; a new Put
// of the id re-creates it.
func TestObjectWhoseLastCopyDiesIsLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	if s := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("sender %s", s)
	}
	// A pipeline: n2 streams from n1's partial copy.
	r2 := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2"))
	if r2.GetSender().GetNodeId() != "n1" {
		t.Fatalf("n2's sender %s, want n1's partial copy", r2.GetSender().GetNodeId())
	}

	out := tb.onNodeFailed("n0").Sends
	out = append(out, relocate(tb, "x", 1, 0, false, t0)...) // n1's stream from n0 ended short
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n1's Locate: %v, want LOST", r.GetError())
	}
	for _, n := range []int{1, 2} {
		d := dropsTo(out, n)
		if d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
			t.Fatalf("partial copy on n%d: drop %v, want a drop with LOST", n, d)
		}
	}
	if r := locateReply(t, locate(tb, "x", 4, t0), replyTo("r4")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("new Locate: %v, want LOST", r.GetError())
	}
	info := tb.onQuery(&messages.QueryObject{ObjectId: "x", Wait: true, TimeoutMs: 1000}, replyTo("q"), t0).Sends
	if i := info[0].Msg.(*messages.ObjectInfo); !errors.Is(i.GetError(), messages.ErrLost) {
		t.Fatalf("query: %v, want LOST", i.GetError())
	}
	// A late republication of a partial copy is refused.
	out = tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(1), State: messages.LocationState_PARTIAL, Size: 1 << 20}).Sends
	if d := dropsTo(out, 1); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
		t.Fatalf("partial republication of a lost object: %v", out)
	}

	// Put again: the object exists anew and is served.
	create(t, tb, "x", 1<<20, 5)
	if r := locateReply(t, locate(tb, "x", 4, t0), replyTo("r4")); r.GetError() != nil || r.GetSender().GetNodeId() != "n5" {
		t.Fatalf("after a new Put: %v from %s", r.GetError(), r.GetSender().GetNodeId())
	}
}

func TestObjectWithASurvivingCopyIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	locate(tb, "x", 1, t0)
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	tb.onNodeFailed("n0")
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n1" {
		t.Fatalf("with n1's complete copy left: %v from %s", r.GetError(), r.GetSender().GetNodeId())
	}
	// The last complete copy evicted (the creator is gone): lost, once
	// n2's stream from it ends short.
	out := tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(1)}).Sends
	out = append(out, relocate(tb, "x", 2, 1, true, t0)...)
	if d := dropsTo(out, 2); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
		t.Fatalf("n2's partial copy after the last complete one went: %v", out)
	}
	if r := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("after the eviction: %v, want LOST", r.GetError())
	}
}

func TestCreatorStillPuttingIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0) // a Put in progress: n0's copy is partial
	locate(tb, "x", 1, t0)
	tb.onNodeFailed("n1") // a receiver dies, the creator lives
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("%v from %s, want the creator's partial copy", r.GetError(), r.GetSender().GetNodeId())
	}
}

func TestReducesTargetIsNotLostWhileReserved(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(0), ReduceId: "red#1"}, replyTo("c"))
	tb.onNodeFailed("n0") // the root died: the coordinator re-creates it
	if out := locate(tb, "t", 1, t0); len(outbox.SendsTo(out, replyTo("r1"))) != 0 {
		t.Fatalf("a Get of a reserved target should wait for the new root: %v", out)
	}
}

// Once its Reduce failed and released the target, a late CreateObject of
// that Reduce (a worker's, still on its way) cannot reserve it again.
func TestReleasedReduceCannotCreateItsTargetAgain(t *testing.T) {
	for _, lost := range []bool{false, true} {
		tb := NewLocationTable(TableConfig{})
		if _, err := tb.Reserve("t", "red#1"); err != nil {
			t.Fatal(err)
		}
		tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(0), ReduceId: "red#1"}, replyTo("c"))
		locate(tb, "t", 2, t0) // a waiting Get keeps the entry
		if lost {
			// The root finished, then died before the coordinator heard.
			complete(tb, "t", 0, 1<<20, true)
			tb.onNodeFailed("n0")
		}
		tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"})
		late := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(1), ReduceId: "red#1"}, replyTo("c2")).Sends
		if r := outbox.SendsTo(late, replyTo("c2")); len(r) != 1 || !errors.Is(r[0].Msg.(*messages.CreateObjectReply).GetError(), messages.ErrInvalidArgument) {
			t.Fatalf("lost=%v: a late create of the released Reduce: %v, want INVALID_ARGUMENT", lost, late)
		}
	}
}

// A root's CreateObject of a Reduce this table knows nothing of comes
// from a Reduce that reserved the target at another incarnation of the
// shard (it moved or restarted since, and the root's member asks the new
// home): UNAVAILABLE, which the Reduce's coordinator takes for a shard
// move, so that the caller's node starts the Reduce again here. Chaos
// seed 78 under load failed INVALID_ARGUMENT "not reserved". Another
// Reduce holding the id here does not make it known; a Put meanwhile is
// still CONFLICT.
func TestCreateOfAReduceReservedAtTheShardsOldHomeIsUnavailable(t *testing.T) {
	for _, other := range []bool{false, true} {
		tb := NewLocationTable(TableConfig{})
		locate(tb, "t", 2, t0) // a Get waits for the target
		if other {
			if _, err := tb.Reserve("t", "red#2"); err != nil {
				t.Fatal(err)
			}
		}
		out := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(0), ReduceId: "red#1", ReduceGeneration: 1}, replyTo("c")).Sends
		if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || !errors.Is(r[0].Msg.(*messages.CreateObjectReply).GetError(), messages.ErrUnavailable) {
			t.Fatalf("other=%v: a root's create of a Reduce reserved elsewhere: %v, want UNAVAILABLE", other, out)
		}
		if tb.entries["t"].known || tb.Reservation("t") != map[bool]string{false: "", true: "red#2"}[other] {
			t.Fatalf("other=%v: the refused create changed the entry: known %v, reserved by %q", other, tb.entries["t"].known, tb.Reservation("t"))
		}
		if other {
			put := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(1)}, replyTo("p")).Sends
			if r := outbox.SendsTo(put, replyTo("p")); len(r) != 1 || !errors.Is(r[0].Msg.(*messages.CreateObjectReply).GetError(), messages.ErrConflict) {
				t.Fatalf("a Put of a reserved target: %v, want CONFLICT", put)
			}
		}
	}
}

// A root that a repair replaced may still be sending its CreateObject; if
// it arrives after the new root's, it must not drop the new root's copy.
func TestStaleRootCannotRecreateTheTarget(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	create := func(n int, gen int32, to string) *messages.CreateObjectReply {
		out := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(n), ReduceId: "red#1", ReduceGeneration: gen}, replyTo(to)).Sends
		if d := dropsTo(out, 5); d != nil {
			t.Fatalf("generation %d on n%d dropped the new root's copy: %v", gen, n, d)
		}
		r := outbox.SendsTo(out, replyTo(to))
		if len(r) != 1 {
			t.Fatalf("create: %v", out)
		}
		return r[0].Msg.(*messages.CreateObjectReply)
	}
	if r := create(5, 3, "new"); r.GetError() != nil {
		t.Fatalf("the new root: %v", r.GetError())
	}
	if r := create(1, 1, "old"); !errors.Is(r.GetError(), messages.ErrCanceled) {
		t.Fatalf("the replaced root's late create: %v, want CANCELED", r.GetError())
	}
	if s := locateReply(t, locate(tb, "t", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n5" {
		t.Fatalf("a Get streams from %s, want the new root n5", s)
	}
}

// A receiver that Locates an object the directory records as complete on
// it does not hold it (chaos soak seed 6000048: a copy's late COMPLETE
// from a node's killed incarnation reached the shard after its cleanup,
// and the restarted node's Get failed with "already holds"). The record
// goes; the receiver gets a sender, or LOST if that was the only copy.
func TestLocateByAReceiverRecordedCompleteDropsTheStaleRecord(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	complete(tb, "x", 1, 1<<20, false) // stale: n1 no longer has it
	if r := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("n1 locating x recorded complete on it: sender %v error %v, want n0", r.GetSender().GetNodeId(), r.GetError())
	}

	// The stale record was the last whole copy: LOST.
	tb = NewLocationTable(TableConfig{})
	create(t, tb, "y", 1<<20, 0)
	complete(tb, "y", 0, 1<<20, true)
	complete(tb, "y", 2, 1<<20, false)
	tb.onNodeFailed("n0")
	if r := locateReply(t, locate(tb, "y", 2, t0), replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n2 locating y whose only other copy died: %v, want LOST", r.GetError())
	}

	// The creator's own record stands: a Get that waited on the creator
	// before its Put finished locates after it; the creator has it (chaos
	// soak seeds 6000006 and 6000277 made it LOST when this removed it).
	tb = NewLocationTable(TableConfig{})
	create(t, tb, "z", 1<<20, 3)
	complete(tb, "z", 3, 1<<20, true)
	locate(tb, "z", 3, t0)
	if r := locateReply(t, locate(tb, "z", 4, t0), replyTo("r4")); r.GetError() != nil || r.GetSender().GetNodeId() != "n3" {
		t.Fatalf("after the creator located its own object: sender %v error %v, want the creator n3", r.GetSender().GetNodeId(), r.GetError())
	}
}

func TestDeletingALostObjectTombstonesIt(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	tb.onNodeFailed("n0")
	out := tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d")).Sends
	if r := outbox.SendsTo(out, replyTo("d")); len(r) != 1 || r[0].Msg.(*messages.DeleteObjectReply).GetError() != nil {
		t.Fatalf("delete of a lost object: %v", out)
	}
	if r := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("after the delete: %v, want DELETED", r.GetError())
	}
}

// The lost set is bounded: the oldest is forgotten (a Get of it waits
// again, as for an id never seen).
func TestLostIDsAreBounded(t *testing.T) {
	tb := NewLocationTable(TableConfig{TombstoneLimit: 2})
	for _, id := range []string{"a", "b", "c"} {
		create(t, tb, id, 1<<20, 0)
		complete(tb, id, 0, 1<<20, true)
	}
	tb.onNodeFailed("n0")
	lost := 0
	for _, id := range []string{"a", "b", "c"} {
		if out := locate(tb, id, 1, t0); len(out) > 0 {
			if r := locateReply(t, out, replyTo("r1")); errors.Is(r.GetError(), messages.ErrLost) {
				lost++
			}
		}
	}
	if lost != 2 || len(tb.lost) != 2 {
		t.Fatalf("%d ids answered LOST, %d remembered; want 2 and 2", lost, len(tb.lost))
	}
}

// A shard rebuilt after its member died (taking the Reduce's coordinator,
// its child, with it) is republished a root's partial target with the
// Reduce's id: that Reduce has failed, so the shard drops the copy rather
// than record a location that nobody finishes and whose release may never
// reach it. A shard that still holds that Reduce's reservation records it
// as usual, and a partial copy without a Reduce id is an ordinary
// creator's.
func TestRebuiltShardDropsARepublishedPartialTarget(t *testing.T) {
	partial := func(rid string) *messages.PublishLocation {
		return &messages.PublishLocation{ObjectId: "t", Node: node(0), State: messages.LocationState_PARTIAL, Size: 1 << 20, Creator: true, ReduceId: rid}
	}
	tb := NewLocationTable(TableConfig{Amnesic: true})
	out := tb.onPublish(partial("red#1")).Sends
	if d := dropsTo(out, 0); d == nil || !errors.Is(d.GetReason(), messages.ErrNotFound) {
		t.Fatalf("a rebuilt shard republished a failed Reduce's partial target: %v, want it dropped (NOT_FOUND)", out)
	}
	if out := locate(tb, "t", 1, t0); len(outbox.SendsTo(out, replyTo("r1"))) != 0 {
		t.Fatalf("a Get after the drop: %v, want it to wait for a producer", out)
	}
	if _, err := tb.Reserve("t", "red#2"); err != nil {
		t.Fatalf("the id cannot be reserved again: %v", err)
	}

	// The shard that reserved it: the copy is recorded.
	tb = NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	if out := tb.onPublish(partial("red#1")).Sends; dropsTo(out, 0) != nil {
		t.Fatalf("the running Reduce's own shard dropped its target: %v", out)
	}
	if r := locateReply(t, locate(tb, "t", 1, t0), replyTo("r1")); r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("a Get of the running Reduce's target: %v, want the root's copy on n0", r)
	}

	// Without a Reduce id: an ordinary creator's partial copy.
	tb = NewLocationTable(TableConfig{Amnesic: true})
	if out := tb.onPublish(partial("")).Sends; dropsTo(out, 0) != nil {
		t.Fatalf("a creator's partial copy without a Reduce was dropped: %v", out)
	}
}

// updates are the LocationUpdates out sends to sub.
func updates(out []outbox.Send, sub any) []*messages.LocationUpdate {
	var got []*messages.LocationUpdate
	for _, s := range outbox.SendsTo(out, sub) {
		if u, ok := s.Msg.(*messages.LocationUpdate); ok {
			got = append(got, u)
		}
	}
	return got
}

// A subscriber (a Reduce coordinator) hears that an object is lost, when
// it happens and when it subscribes to one already lost: a Reduce that
// never got a location of a source whose only copy died would otherwise
// wait for it until its deadline. It stays subscribed: a new Put of the
// id is a new source for it.
func TestSubscribersHearAnObjectIsLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	sub := replyTo("coord")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
	got := updates(tb.onNodeFailed("n0").Sends, sub)
	if len(got) != 2 || got[0].GetNode().GetNodeId() != "n0" || got[0].GetState() != messages.LocationState_LOCATION_STATE_UNSPECIFIED {
		t.Fatalf("n0 failed: updates %v, want n0's copy gone, then LOST", got)
	}
	if u := got[1]; !errors.Is(u.GetError(), messages.ErrLost) || u.GetNode() != nil || u.GetObjectId() != "x" {
		t.Fatalf("n0 failed: update %v, want LOST without a node", u)
	}

	// A subscriber that comes after the loss (the source was lost before
	// the Reduce began) hears it at once; so does a resubscription.
	late := replyTo("late")
	for range 2 {
		got = updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "late", late).Sends, late)
		if len(got) != 1 || !errors.Is(got[0].GetError(), messages.ErrLost) {
			t.Fatalf("subscribe to a lost object: %v, want LOST", got)
		}
	}
	// Put again: both subscribers hear of the new copy.
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Fingerprint: 42, Creator: node(5)}, replyTo("c")).Sends
	for _, s := range []any{sub, late} {
		if got := updates(out, s); len(got) != 1 || got[0].GetNode().GetNodeId() != "n5" || got[0].GetError() != nil {
			t.Fatalf("after a new Put, %v heard %v, want n5's copy", s, got)
		}
	}
	if got := updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "late", late).Sends, late); len(got) != 1 || got[0].GetError() != nil {
		t.Fatalf("subscribe after the new Put: %v, want n5's copy", got)
	}
}

// An eviction of the last complete copy is a loss too; an object that
// keeps a complete copy is not.
func TestSubscribersHearTheLastEviction(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	locate(tb, "x", 1, t0)
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	sub := replyTo("coord")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
	for _, u := range updates(tb.onNodeFailed("n0").Sends, sub) {
		if u.GetError() != nil {
			t.Fatalf("n1's complete copy is left: %v", u)
		}
	}
	got := updates(tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(1)}).Sends, sub)
	if len(got) == 0 || !errors.Is(got[len(got)-1].GetError(), messages.ErrLost) {
		t.Fatalf("the last copy evicted: %v, want LOST last", got)
	}
}

// A receiver's fetch finished just as its sender's node died, and its
// FetchDone came after the object was found lost (the grace passed
// without it): the loss dropped that copy while it was partial, but a
// node keeps a whole copy that a loss's drop reaches (storeactor's
// TestLossDropKeepsAWholeCopy), so the FetchDone ends the loss: the copy
// is a location for subscribers and Locates. Ignored, the object's last
// whole copy was freed, and a final Get answered LOST where a member had
// just read the object whole (chaos soak seeds 5000087 and 5000433).
func TestFetchDoneOfACopyTheLossDroppedEndsIt(t *testing.T) {
	const grace = 100 * time.Millisecond
	for _, republished := range []bool{false, true} {
		tb := NewLocationTable(TableConfig{LossGrace: grace})
		create(t, tb, "x", 1<<20, 0)
		complete(tb, "x", 0, 1<<20, true)
		sub := replyTo("coord")
		tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
		locate(tb, "x", 1, t0) // n1 streams from n0
		tb.onNodeFailed("n0")
		tb.onTick(t0)
		if d := dropsTo(tb.onTick(t0.Add(grace)).Sends, 1); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
			t.Fatalf("n0 failed: n1's partial copy dropped with %v, want LOST", d)
		}
		if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
			t.Fatalf("Locate after the loss: %v, want LOST", r.GetError())
		}
		// The copy's report, as a FetchDone or (the shard having moved)
		// as its node's republication.
		var out []outbox.Send
		if republished {
			out = complete(tb, "x", 1, 1<<20, false)
		} else {
			out = tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(1), Sender: node(0), Size: 1 << 20}).Sends
		}
		if got := updates(out, sub); len(got) != 1 || got[0].GetNode().GetNodeId() != "n1" || got[0].GetState() != messages.LocationState_COMPLETE {
			t.Fatalf("republished %v: the dropped copy's report: subscriber heard %v, want n1 COMPLETE", republished, got)
		}
		if dropsTo(out, 1) != nil {
			t.Fatalf("republished %v: the dropped copy's report was answered with another drop: %v", republished, out)
		}
		if r := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3")); r.GetError() != nil || r.GetSender().GetNodeId() != "n1" {
			t.Fatalf("republished %v: Locate after the report: %v from %s, want n1", republished, r.GetError(), r.GetSender().GetNodeId())
		}
	}
}

// A copy the table no longer tracked when the object was lost (another
// receiver named it a failed sender, yet it went on streaming to its end)
// reports itself whole afterwards: the object is not lost after all. As a
// complete republication does, its FetchDone ends the loss, and the
// subscribers hear of the copy.
func TestFetchDoneOfACopyTheLossDidNotDropEndsIt(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	sub := replyTo("coord")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
	locate(tb, "x", 1, t0) // n1 streams from n0
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n2's sender %s, want n1", s)
	}
	// n2 gives up on n1 (a stall): n1 leaves the table, n2 takes n0.
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), FailedSender: node(1), TimeoutMs: 1000}, replyTo("r2"), t0)
	out := tb.onNodeFailed("n0").Sends
	out = append(out, relocate(tb, "x", 2, 0, false, t0)...) // n2's stream from n0 ended short
	if dropsTo(out, 1) != nil || dropsTo(out, 2) == nil {
		t.Fatalf("n0 failed: %v, want n2's copy dropped and nothing sent to n1", out)
	}
	out = tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(1), Sender: node(0), Size: 1 << 20, Fingerprint: 7}).Sends
	if got := updates(out, sub); len(got) != 1 || got[0].GetNode().GetNodeId() != "n1" || got[0].GetState() != messages.LocationState_COMPLETE || got[0].GetSize() != 1<<20 {
		t.Fatalf("FetchDone of a surviving copy: subscriber heard %v, want n1 COMPLETE", got)
	}
	if r := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3")); r.GetError() != nil || r.GetSender().GetNodeId() != "n1" {
		t.Fatalf("Locate after the surviving copy's FetchDone: %v from %s, want n1", r.GetError(), r.GetSender().GetNodeId())
	}
}

// When an object is lost, its partial copies are dropped, and its
// subscribers hear that each of them left before they hear LOST, as when
// a copy is removed any other way: a Reduce coordinator kept a dropped
// copy among its source's locations.
func TestSubscribersHearTheLossDroppedPartialCopies(t *testing.T) {
	const grace = 100 * time.Millisecond
	tb := NewLocationTable(TableConfig{LossGrace: grace})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	sub := replyTo("coord")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
	if got := updates(locate(tb, "x", 1, t0), sub); len(got) != 1 || got[0].GetNode().GetNodeId() != "n1" || got[0].GetState() != messages.LocationState_PARTIAL {
		t.Fatalf("n1 starts fetching: subscriber heard %v, want n1 PARTIAL", got)
	}
	if got := updates(locate(tb, "x", 2, t0), sub); len(got) != 1 || got[0].GetNode().GetNodeId() != "n2" {
		t.Fatalf("n2 starts fetching: subscriber heard %v, want n2 PARTIAL", got)
	}
	out := tb.onNodeFailed("n0").Sends // in doubt until the grace passes
	out = append(out, tb.onTick(t0).Sends...)
	out = append(out, tb.onTick(t0.Add(grace)).Sends...)
	left := map[string]bool{}
	got := updates(out, sub)
	if len(got) == 0 {
		t.Fatal("n0 failed: the subscriber heard nothing")
	}
	for _, u := range got[:len(got)-1] {
		if u.GetError() != nil || u.GetState() != messages.LocationState_LOCATION_STATE_UNSPECIFIED {
			t.Fatalf("n0 failed: update %v before the last, want a copy leaving", u)
		}
		left[u.GetNode().GetNodeId()] = true
	}
	for _, n := range []int{0, 1, 2} {
		if !left[node(n).GetNodeId()] {
			t.Fatalf("n0 failed: subscriber heard %v, want n0, n1 and n2 leaving", got)
		}
		if n > 0 && dropsTo(out, n) == nil {
			t.Fatalf("n0 failed: n%d's partial copy not dropped: %v", n, out)
		}
	}
	if u := got[len(got)-1]; !errors.Is(u.GetError(), messages.ErrLost) {
		t.Fatalf("n0 failed: last update %v, want LOST", u)
	}
}

// A shard that restarted or moved forgets its lost marks, and a source
// whose only copy died with the shard's old host is republished by
// nobody: a Reduce that resubscribes to it (having located it before)
// heard nothing and waited for its deadline. Told that the subscriber
// located it before, the table answers LOST when it knows no copy; it
// does not when a copy is known, when a Reduce is producing the id, or
// when the subscriber never located it (it may not be Put yet).
func TestLocatedBeforeSubscriberHearsLostOfAnIDTheTableDoesNotKnow(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	sub := replyTo("coord")
	if got := updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub).Sends, sub); len(got) != 0 {
		t.Fatalf("first subscription to an unknown id: %v, want nothing", got)
	}
	got := updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x", LocatedBefore: true}, "coord", sub).Sends, sub)
	if len(got) != 1 || !errors.Is(got[0].GetError(), messages.ErrLost) || got[0].GetNode() != nil {
		t.Fatalf("resubscription of a located source the table does not know: %v, want LOST", got)
	}
	// Still subscribed: a new Put is a new source.
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Creator: node(5)}, replyTo("c")).Sends
	if got := updates(out, sub); len(got) != 1 || got[0].GetNode().GetNodeId() != "n5" {
		t.Fatalf("after a new Put: %v, want n5's copy", got)
	}
	got = updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x", LocatedBefore: true}, "coord", sub).Sends, sub)
	if len(got) != 1 || got[0].GetError() != nil || got[0].GetNode().GetNodeId() != "n5" {
		t.Fatalf("resubscription with a copy known: %v, want n5's copy only", got)
	}
	// A republished copy is known too.
	complete(tb, "y", 1, 1<<20, true)
	got = updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "y", LocatedBefore: true}, "coord", sub).Sends, sub)
	if len(got) != 1 || got[0].GetError() != nil {
		t.Fatalf("resubscription of a republished source: %v, want its copy only", got)
	}
	// A Reduce's target still being produced is no loss.
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	if got := updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "t", LocatedBefore: true}, "coord", sub).Sends, sub); len(got) != 0 {
		t.Fatalf("resubscription of a reserved target: %v, want nothing", got)
	}
}

// A Reduce's target becomes readable whole only when its coordinator
// commits a root's result (rootComplete: the COMPLETE creator publication
// with the Reduce's id), and that commit always stands while the Reduce
// holds the reservation: a receiver whose stream from the root, still
// partial, stalled named the root a failed sender, which removed its
// copy. Refused, the commit left the target reserved with no copy, and
// every Get of it waited for its deadline although the root held the
// result.
func TestCommitRecordsARootCopyAFailedSenderRemoved(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	locate(tb, "t", 2, t0) // n2 streams from the root on n0
	tb.onLocate(&messages.Locate{ObjectId: "t", Receiver: node(2), FailedSender: node(0), TimeoutMs: 1000}, replyTo("r2"), t0)
	out := rootComplete(tb, "t", 0, 1<<20, "red#1")
	if r := locateReply(t, out, replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" || r.GetSenderState() != messages.LocationState_COMPLETE {
		t.Fatalf("the parked Get once the coordinator committed: %v, want the root's whole copy on n0", r)
	}
	if e := tb.entries["t"]; e.target.reservedBy != "" {
		t.Fatalf("the commit left the target reserved by %q", e.target.reservedBy)
	}
}

// Once committed, a Reduce's target is an object like any other: its
// Reduce never creates it again (its coordinator has answered), so a
// late CreateObject of that Reduce is refused, and when its only copy
// dies it is LOST, as the Reduce's result is, until it is Put again.
func TestCommittedTargetIsNotCreatedAgainByItsReduce(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	rootComplete(tb, "t", 0, 1<<20, "red#1")
	tb.onNodeFailed("n0")
	if r := locateReply(t, locate(tb, "t", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("the committed target whose only copy died: %v, want LOST", r.GetError())
	}
	again := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(1), ReduceId: "red#1", ReduceGeneration: 2}, replyTo("c2")).Sends
	if r := outbox.SendsTo(again, replyTo("c2")); len(r) != 1 || !errors.Is(r[0].Msg.(*messages.CreateObjectReply).GetError(), messages.ErrInvalidArgument) {
		t.Fatalf("its Reduce creating the committed target again: %v, want INVALID_ARGUMENT", again)
	}
	if r := locateReply(t, locate(tb, "t", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("after the refused create: %v, want LOST still", r.GetError())
	}
	create(t, tb, "t", 1<<20, 3)
	if r := locateReply(t, locate(tb, "t", 1, t0), replyTo("r1")); r.GetError() != nil || r.GetSender().GetNodeId() != "n3" {
		t.Fatalf("after a new Put: %v, want n3's copy", r)
	}
}

// A Reduce's coordinator commits its root's result while the root's node
// fails: the commit names a copy the failure removed. Recorded again, it
// makes the shard watch the node, whose failure comes back at once (see
// internal/actors/shardactor) and leaves the target lost, which is what its Gets
// must hear, at once, rather than wait for a reservation nobody ends.
func TestCommitCrossingTheRootsFailureLeavesTheTargetLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	locate(tb, "t", 2, t0) // a Get streaming from the root
	tb.onNodeFailed("n0")
	if out := locate(tb, "t", 3, t0); len(outbox.SendsTo(out, replyTo("r3"))) != 0 {
		t.Fatalf("a Get of the target while its Reduce repairs: %v, want it to wait", out)
	}
	rootComplete(tb, "t", 0, 1<<20, "red#1") // serves n3 from n0 (its stream fails)
	out := tb.onNodeFailed("n0").Sends       // the watch, renewed, says n0 is gone
	out = append(out, relocate(tb, "t", 2, 0, false, t0)...)
	out = append(out, relocate(tb, "t", 3, 0, false, t0)...)
	for _, n := range []int{2, 3} {
		if d := dropsTo(out, n); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
			t.Fatalf("the reader's partial copy on n%d: drop %v, want LOST", n, d)
		}
	}
	if r := locateReply(t, locate(tb, "t", 4, t0), replyTo("r4")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("a Get after the commit and the failure: %v, want LOST", r.GetError())
	}
}

// A sliced AllReduce's creator gather registers the target unoffered
// (chaos seed 91161246: three Gets streamed a sliced run's target from the
// creator's gather, a participant then died, and the re-planned
// AllReduce answered with four sources, not the five those bytes held).
// No Locate gets it and no subscriber hears of it until the coordinator
// publishes it complete; then the parked Locate is served.
func TestUnofferedCopyIsOfferedOnceComplete(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	sub := tb.onSubscribe(&messages.Subscribe{ObjectId: "t"}, "coord", replyTo("coord")).Sends
	out := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(0), ReduceId: "red#1", ReduceGeneration: 1, Unoffered: true}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("create: %v", out)
	}
	if n := len(outbox.SendsTo(out, replyTo("coord"))) + len(sub); n != 0 {
		t.Fatalf("a subscriber heard of the unoffered copy: %v %v", sub, out)
	}
	if out := locate(tb, "t", 2, t0); len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("a Locate was offered the unoffered copy: %v", out)
	}
	if s := tb.onSubscribe(&messages.Subscribe{ObjectId: "t"}, "coord2", replyTo("coord2")).Sends; len(s) != 0 {
		t.Fatalf("a later subscriber heard of the unoffered copy: %v", s)
	}
	out = tb.onPublish(&messages.PublishLocation{ObjectId: "t", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true}).Sends
	if r := locateReply(t, out, replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("the parked Locate once the copy is complete: %v", r)
	}
	heard := false
	for _, u := range outbox.SendsTo(out, replyTo("coord")) {
		m := u.Msg.(*messages.LocationUpdate)
		heard = heard || m.GetNode().GetNodeId() == "n0" && m.GetState() == messages.LocationState_COMPLETE
	}
	if !heard {
		t.Fatalf("the subscriber did not hear of the complete copy: %v", out)
	}
}

// A receiver names the last whole copy, a fetched one, as its failed
// sender before the shard hears that its node died: the copy is avoided,
// not removed, as a creator's is, so the failure, when it comes, finds it
// and the object is LOST at once. Removed, no copy was left for the
// failure to end, and Gets of the object waited for their deadlines.
func TestLastWholeCopyNamedFailedIsLostWithItsNode(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	locate(tb, "x", 1, t0)
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	tb.onNodeFailed("n0") // n1's copy is the last whole one
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n2's sender %s, want n1", s)
	}
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), FailedSender: node(1), TimeoutMs: 1000}, replyTo("r2"), t0).Sends
	if len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("n2 locating again, naming n1 failed: %v, want it to wait", out)
	}
	out = tb.onNodeFailed("n1").Sends
	if r := locateReply(t, out, replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n2's parked Locate once n1 failed: %v, want LOST", r.GetError())
	}
}
