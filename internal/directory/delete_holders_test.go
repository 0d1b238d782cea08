package directory

import (
	"errors"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// deleteReply is the table's DeleteObjectReply to d in out, or nil.
func deleteReply(t *testing.T, out []outbox.Send, d replyTo) *messages.DeleteObjectReply {
	t.Helper()
	r := outbox.SendsTo(out, d)
	switch len(r) {
	case 0:
		return nil
	case 1:
		return r[0].Msg.(*messages.DeleteObjectReply)
	}
	t.Fatalf("%d replies to %v: %v", len(r), d, out)
	return nil
}

func droppedIDs(r *messages.DeleteObjectReply) []string {
	var ids []string
	for _, n := range r.GetDropped() {
		ids = append(ids, n.GetNodeId())
	}
	slices.Sort(ids)
	return ids
}

// A second Delete of an id (another caller's, or a retry) names the nodes
// that held copies when the first deleted it, and those that published a
// copy since: its caller asks them to drop too, so it does not answer OK
// while the first Delete's drops are still on their way to them (a Get
// there would read its copy after that answer).
func TestSecondDeleteNamesTheHolders(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 100, 0)
	locate(tb, "x", 1, t0) // n1 fetches from n0
	first := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d1")).Sends, replyTo("d1"))
	if first == nil || first.GetError() != nil || !slices.Equal(droppedIDs(first), []string{"n0", "n1"}) {
		t.Fatalf("first Delete: %v, want OK naming n0 and n1", first)
	}
	second := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d2")).Sends, replyTo("d2"))
	if second == nil || second.GetError() != nil || !slices.Equal(droppedIDs(second), []string{"n0", "n1"}) {
		t.Fatalf("second Delete: %v, want OK naming n0 and n1 again", second)
	}
	// A copy that reaches the table after the Delete is dropped, and
	// named to the next Delete too.
	if d := dropsTo(complete(tb, "x", 2, 100, false), 2); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
		t.Fatal("a copy published after the Delete was not dropped as deleted")
	}
	third := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d3")).Sends, replyTo("d3"))
	if !slices.Equal(droppedIDs(third), []string{"n0", "n1", "n2"}) {
		t.Fatalf("third Delete names %v, want n0, n1 and n2", droppedIDs(third))
	}
	// Forgotten with the tombstone.
	small := NewLocationTable(TableConfig{TombstoneLimit: 1})
	create(t, small, "a", 1, 0)
	small.onDelete(&messages.DeleteObject{ObjectId: "a"}, nil)
	create(t, small, "b", 1, 0)
	small.onDelete(&messages.DeleteObject{ObjectId: "b"}, nil)
	if _, ok := small.deletedFrom["a"]; ok || len(small.deletedFrom) != 1 {
		t.Fatalf("holders of deleted ids: %v, want only b's", small.deletedFrom)
	}
}

// A table that started over answers a Delete only once every store node
// has republished: before, a copy it does not list yet would be missed
// by the Delete, and read on its node after the Delete answered OK.
func TestAmnesicTableDeletesAfterRepublication(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	if r := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d")).Sends, replyTo("d")); r != nil {
		t.Fatalf("Delete answered %v before the store nodes republished", r)
	}
	// n3's copy comes back while the Delete waits.
	complete(tb, "x", 3, 100, true)
	out := tb.onRepublished().Sends
	r := deleteReply(t, out, replyTo("d"))
	if r == nil || r.GetError() != nil || !slices.Equal(droppedIDs(r), []string{"n3"}) {
		t.Fatalf("Delete after republication: %v, want OK naming n3", r)
	}
	if d := dropsTo(out, 3); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
		t.Fatalf("n3 not told to drop its copy as deleted: %v", out)
	}
	// From now on Deletes are answered at once, an unknown id's too.
	out = tb.onDelete(&messages.DeleteObject{ObjectId: "never"}, replyTo("d2")).Sends
	if r := deleteReply(t, out, replyTo("d2")); r == nil || r.GetError() != nil {
		t.Fatalf("Delete of an unknown id after republication: %v", r)
	}
	if r := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("Get after the Delete: %v", r)
	}
}

// The Deletes a rebuilt table holds are bounded.
func TestAmnesicTableBoundsParkedDeletes(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	for range MaxParkedDeletes {
		tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, nil)
	}
	r := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "y"}, replyTo("d")).Sends, replyTo("d"))
	if r == nil || !errors.Is(r.GetError(), messages.ErrResourceExhausted) {
		t.Fatalf("Delete past the bound: %v, want RESOURCE_EXHAUSTED", r)
	}
}

// A Delete of a lost object names the nodes whose copies the loss
// dropped: one may be whole (its report crossed the loss) while its drop
// is still on the way, and its caller waits for them as for any copy.
func TestDeleteOfALostObjectNamesTheCopiesTheLossDropped(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	complete(tb, "x", 0, 1<<20, true)
	locate(tb, "x", 1, t0) // n1 streams from n0
	out := tb.onNodeFailed("n0").Sends
	out = append(out, relocate(tb, "x", 1, 0, false, t0)...)
	if d := dropsTo(out, 1); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
		t.Fatalf("precondition: x lost and n1's copy dropped: %v", out)
	}
	r := deleteReply(t, tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d")).Sends, replyTo("d"))
	if r == nil || r.GetError() != nil || !slices.Equal(droppedIDs(r), []string{"n1"}) {
		t.Fatalf("Delete of the lost x: %v, want OK naming n1", r)
	}
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("Get after the Delete: %v, want DELETED", r)
	}
}

// A table not yet told Republished whose owner names the store nodes not
// heard from answers a Delete at once, naming them beside the holders it
// lists (a node listed is named once). Only an id it does not know, in a
// table that did not start over, waits: NOT_FOUND is true only once every
// node has republished.
func TestDeleteNamingAnswersAtOnceNamingTheNodesNotHeardFrom(t *testing.T) {
	pending := []*messages.NodeRef{node(0), node(2)}
	for _, amnesic := range []bool{false, true} {
		tb := NewLocationTable(TableConfig{Amnesic: amnesic, AwaitRepublish: true})
		create(t, tb, "x", 100, 0)
		r := deleteReply(t, tb.onDeleteNaming(&messages.DeleteObject{ObjectId: "x"}, replyTo("d"), pending).Sends, replyTo("d"))
		if r == nil || r.GetError() != nil || !slices.Equal(droppedIDs(r), []string{"n0", "n2"}) {
			t.Fatalf("amnesic %v: Delete of a listed x: %v, want OK naming n0 (the holder) and n2", amnesic, r)
		}
		r = deleteReply(t, tb.onDeleteNaming(&messages.DeleteObject{ObjectId: "x"}, replyTo("d2"), []*messages.NodeRef{node(3)}).Sends, replyTo("d2"))
		if r == nil || r.GetError() != nil || !slices.Equal(droppedIDs(r), []string{"n0", "n3"}) {
			t.Fatalf("amnesic %v: second Delete of x: %v, want OK naming n0 and n3", amnesic, r)
		}
		out := tb.onDeleteNaming(&messages.DeleteObject{ObjectId: "unknown"}, replyTo("d3"), pending).Sends
		r = deleteReply(t, out, replyTo("d3"))
		switch {
		case amnesic && (r == nil || r.GetError() != nil || !slices.Equal(droppedIDs(r), []string{"n0", "n2"})):
			t.Fatalf("amnesic: Delete of an unknown id: %v, want OK naming n0 and n2", r)
		case !amnesic && r != nil:
			t.Fatalf("Delete of an unknown id before every node republished: %v, want it held", r)
		}
		if amnesic {
			continue
		}
		r = deleteReply(t, tb.onRepublished().Sends, replyTo("d3"))
		if r == nil || !errors.Is(r.GetError(), messages.ErrNotFound) {
			t.Fatalf("the held Delete of an unknown id once every node republished: %v, want NOT_FOUND", r)
		}
	}
}
