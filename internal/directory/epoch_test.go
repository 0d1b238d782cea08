package directory

import (
	"errors"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// fetchDoneIn is the FetchDone of receiver's copy fetched under the epoch
// of the LocateReply that named its sender.
func fetchDoneIn(id string, receiver, sender int, loc *messages.LocateReply) *messages.FetchDone {
	return &messages.FetchDone{ObjectId: id, Receiver: node(receiver), Sender: node(sender), Size: loc.GetSize(),
		Fingerprint: loc.GetFingerprint(), Epoch: loc.GetEpoch()}
}

// A Reduce that creates its target again (its root moved) drops every
// copy of the old epoch, but a receiver's report that its copy is whole
// can cross that drop: the copy holds the old root's bytes. Recorded, it
// was offered as a complete copy of the new target (a complete sender
// before the new root's partial one), and Gets returned a result the
// Reduce does not answer with. It is not recorded, and the receiver, no
// longer listed, is told again to drop it.
func TestFetchDoneOfAnEarlierEpochIsNotOffered(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	old := locateReply(t, locate(tb, "t", 2, t0), replyTo("r2"))
	if old.GetSender().GetNodeId() != "n0" {
		t.Fatalf("n2's sender %v, want the root on n0", old.GetSender())
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(1), ReduceId: "red#1", ReduceGeneration: 2}, replyTo("c2")).Sends
	if d := dropsTo(out, 2); d == nil || !errors.Is(d.GetReason(), messages.ErrReset) {
		t.Fatalf("the new root's create: drop to n2 %v, want RESET", d)
	}
	out = tb.onFetchDone(fetchDoneIn("t", 2, 0, old)).Sends
	if d := dropsTo(out, 2); d == nil || !errors.Is(d.GetReason(), messages.ErrReset) {
		t.Fatalf("n2's FetchDone of the old epoch: %v, want its copy dropped with RESET", out)
	}
	r := locateReply(t, locate(tb, "t", 3, t0), replyTo("r3"))
	if r.GetSender().GetNodeId() != "n1" || r.GetEpoch() == old.GetEpoch() {
		t.Fatalf("a Get after the re-creation: sender %v epoch %d, want the new root n1 in a new epoch (old %d)", r.GetSender(), r.GetEpoch(), old.GetEpoch())
	}
	// n2 fetches again, now from n1: a late report of its first copy
	// must not touch the new one.
	tb.onLocate(&messages.Locate{ObjectId: "t", Receiver: node(2), TimeoutMs: 1000}, replyTo("r2"), t0)
	if out := tb.onFetchDone(fetchDoneIn("t", 2, 0, old)).Sends; len(out) != 0 {
		t.Fatalf("a late old-epoch report while n2 fetches anew: %v, want nothing", out)
	}
	if e := tb.entries["t"]; e.locs["n2"] == nil || e.locs["n2"].state != messages.LocationState_PARTIAL {
		t.Fatalf("n2's new copy after the late report: %+v, want it partial still", e.locs["n2"])
	}
}

// A failed Reduce's release gives its target a new epoch: a copy whose
// fetch completed as the release dropped it, reported late, is of the
// released contents, and is neither recorded nor able to teach the entry
// (which a waiting Get keeps) the object.
func TestFetchDoneOfAReleasedTargetIsNotRecorded(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	rootComplete(tb, "t", 0, 1<<20, "red#1")
	loc := locateReply(t, locate(tb, "t", 2, t0), replyTo("r2"))
	tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"})
	locate(tb, "t", 3, t0) // a Get waits for the id to be produced again
	tb.onFetchDone(fetchDoneIn("t", 2, 0, loc))
	if e := tb.entries["t"]; e == nil || e.known || len(e.locs) != 0 {
		t.Fatalf("the released target after a late FetchDone: %+v, want nothing known", e)
	}
	// With no entry left at all, the same.
	tb = NewLocationTable(TableConfig{})
	reduceRoot(t, tb, 0)
	rootComplete(tb, "t", 0, 1<<20, "red#1")
	loc = locateReply(t, locate(tb, "t", 2, t0), replyTo("r2"))
	tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"})
	if out := tb.onFetchDone(fetchDoneIn("t", 2, 0, loc)).Sends; dropsTo(out, 2) == nil {
		t.Fatalf("a late FetchDone of the released target with no entry: %v, want its copy dropped", out)
	}
	if tb.entries["t"] != nil && tb.entries["t"].known {
		t.Fatal("the released target was learnt from a late FetchDone")
	}
}

// Epochs never repeat: not for one id created, released and created
// again, and not across the tables a shard starts over with
// (TableConfig.Instance).
func TestEpochsAreNeverReused(t *testing.T) {
	seen := map[uint64]string{}
	note := func(what string, ep uint64) {
		t.Helper()
		if prev, ok := seen[ep]; ok {
			t.Fatalf("%s has epoch %d, as %s had", what, ep, prev)
		}
		seen[ep] = what
	}
	for _, instance := range []uint32{1, 2} {
		tb := NewLocationTable(TableConfig{Instance: instance})
		reduceRoot(t, tb, 0)
		note("the first root's target", locateReply(t, locate(tb, "t", 2, t0), replyTo("r2")).GetEpoch())
		tb.onRelease(&messages.ReleaseTarget{TargetId: "t", ReduceId: "red#1"})
		if _, err := tb.Reserve("t", "red#2"); err != nil {
			t.Fatal(err)
		}
		tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(1), ReduceId: "red#2", ReduceGeneration: 1}, replyTo("c"))
		note("the second Reduce's target", locateReply(t, locate(tb, "t", 3, t0), replyTo("r3")).GetEpoch())
	}
}

// A shard that started over learns an object it has no entry for from a
// receiver's FetchDone of a fetch that began under its old incarnation
// (its sender's republication has not come, or its sender died): the
// copy is whole. Ignored, no Delete reached it, no Get was offered it,
// and a Reduce that had located the object before heard it was LOST.
func TestRebuiltShardLearnsAnUnknownObjectFromAFetchDone(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true, Instance: 7})
	out := tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(1), Sender: node(0), Size: 1 << 20, Fingerprint: 7, Epoch: 3<<40 | 5}).Sends // an earlier table's epoch
	if dropsTo(out, 1) != nil {
		t.Fatalf("FetchDone of an unknown id: %v, want the copy kept", out)
	}
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n1" {
		t.Fatalf("a Get after the FetchDone: %v, want n1's copy", r)
	}
	sub := replyTo("coord")
	got := updates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x", LocatedBefore: true}, "coord", sub).Sends, sub)
	for _, u := range got {
		if u.GetError() != nil {
			t.Fatalf("a subscriber that located x before: %v, want its copy, not LOST", u)
		}
	}
}

// Once every store node has republished to a shard that started over, an
// object it knows only from partial copies (their receivers' sender died
// before the shard started over) can never be read whole: it is LOST
// once none may be whole (their receivers located again, or LossGrace
// passed without a report), and Gets waiting for it hear so then, not at
// their deadlines. Objects with a whole copy, a creator's copy, inline
// bytes or a Reduce producing them are not.
func TestRepublishedShardMarksObjectsWithOnlyPartialCopiesLost(t *testing.T) {
	const grace = 100 * time.Millisecond
	tb := NewLocationTable(TableConfig{Amnesic: true, Instance: 7, LossGrace: grace})
	partial := func(id string, n int, creator bool) {
		tb.onPublish(&messages.PublishLocation{ObjectId: id, Node: node(n), State: messages.LocationState_PARTIAL, Size: 1 << 20, Creator: creator})
	}
	partial("orphan", 1, false)
	partial("orphan", 2, false)
	partial("fed", 1, false)
	complete(tb, "fed", 3, 1<<20, true)
	partial("putting", 4, true)
	if _, err := tb.Reserve("t", "red#1"); err != nil {
		t.Fatal(err)
	}
	tb.onCreate(&messages.CreateObject{ObjectId: "t", Size: 1 << 20, Creator: node(5), ReduceId: "red#1", ReduceGeneration: 1}, replyTo("c"))
	if out := locate(tb, "orphan", 6, t0); len(outbox.SendsTo(out, replyTo("r6"))) != 0 {
		t.Fatalf("a Get of the orphan before the rebuild is over: %v, want it to wait", out)
	}
	out := tb.onRepublished().Sends
	if r := outbox.SendsTo(out, replyTo("r6")); len(r) != 0 {
		t.Fatalf("the parked Get of the orphan while its copies may be whole: %v, want it to wait", r)
	}
	out = append(out, tb.onTick(t0).Sends...)
	out = append(out, tb.onTick(t0.Add(grace)).Sends...)
	if r := locateReply(t, out, replyTo("r6")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("the parked Get of the orphan: %v, want LOST", r.GetError())
	}
	for _, n := range []int{1, 2} {
		if d := dropsTo(out, n); d == nil || d.GetObjectId() != "orphan" || !errors.Is(d.GetReason(), messages.ErrLost) {
			t.Fatalf("the orphan's partial copy on n%d: drop %v, want LOST", n, d)
		}
	}
	for _, id := range []string{"fed", "putting", "t"} {
		if _, lost := tb.lost[id]; lost {
			t.Fatalf("%s was marked lost", id)
		}
	}
}
