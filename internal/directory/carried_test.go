package directory

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// kept gathers what a table sent its keeper, as the keeper republishes
// it to the shard's next table.
func kept(out []outbox.Send, keeper any) *messages.Tombstones {
	all := &messages.Tombstones{}
	for _, s := range outbox.SendsTo(out, keeper) {
		m := s.Msg.(*messages.Tombstones)
		all.ObjectIds = append(all.ObjectIds, m.GetObjectIds()...)
		all.LostIds = append(all.LostIds, m.GetLostIds()...)
	}
	return all
}

func deleteAnswer(t *testing.T, out []outbox.Send, to any) *messages.DeleteObjectReply {
	t.Helper()
	r := outbox.SendsTo(out, to)
	if len(r) != 1 {
		t.Fatalf("want one Delete reply to %v, got %d in %v", to, len(r), out)
	}
	return r[0].Msg.(*messages.DeleteObjectReply)
}

// A shard moves back to a member that rejoined, at that member's first
// placement: no former owner is known there, so its table is not
// amnesic, and what only the table it replaces knew (an object lost
// there, the deletion of a lost object no node held) came back from no
// store node. A Delete of the lost object answered NOT_FOUND, a Get of it
// waited for its deadline instead of LOST, and a Get of the deleted one
// did not hear DELETED. The former table gives them to its keeper, whose
// republication carries them to the new table.
func TestLossesAndDeletionsOfNoCopyFollowTheShard(t *testing.T) {
	const size = 1 << 20
	const keeper = replyTo("keeper")
	old := NewLocationTable(TableConfig{Keeper: keeper})
	var notes []outbox.Send
	for _, id := range []string{"lost", "deleted", "back"} {
		create(t, old, id, size, 0)
		complete(old, id, 0, size, true)
	}
	notes = append(notes, old.onNodeFailed("n0").Sends...) // every copy was the creator's
	notes = append(notes, old.onDelete(&messages.DeleteObject{ObjectId: "deleted"}, replyTo("d0")).Sends...)
	carry := kept(notes, keeper)
	if len(carry.GetLostIds()) != 3 || len(carry.GetObjectIds()) != 1 || carry.GetObjectIds()[0] != "deleted" {
		t.Fatalf("the keeper was told %v, want the three losses and the deletion", carry)
	}
	// "back" is Put again on n1 while the shard moves.

	for _, tc := range []struct {
		name   string
		carry  bool
		amnesy bool
	}{{"carried", true, false}, {"carried by an amnesic table", true, true}, {"without the carry", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewLocationTable(TableConfig{AwaitRepublish: true, Amnesic: tc.amnesy})
			out := tb.onDelete(&messages.DeleteObject{ObjectId: "lost"}, replyTo("d1")).Sends
			out = append(out, locate(tb, "lost", 2, t0)...)
			out = append(out, locate(tb, "deleted", 3, t0)...)
			if len(out) != 0 {
				t.Fatalf("answered before the store nodes republished: %v", out)
			}
			// The republication: n1's copy of "back", and the keeper's.
			out = append(out, complete(tb, "back", 1, size, true)...)
			if tc.carry {
				out = append(out, tb.onApplyTombstones(carry).Sends...)
			}
			out = append(out, tb.onRepublished().Sends...)
			if !tc.carry {
				// The gap this closes: the Delete of an object that existed
				// said it never did.
				if err := deleteAnswer(t, out, replyTo("d1")).GetError(); !errors.Is(messages.ErrOrNil(err), messages.ErrNotFound) {
					t.Fatalf("without the carry the Delete answered %v; the test no longer shows the gap", err)
				}
				return
			}
			if err := deleteAnswer(t, out, replyTo("d1")).GetError(); err != nil {
				t.Fatalf("Delete of an object lost before the move: %v, want OK", err)
			}
			// A Get parked beside the Delete hears of the loss; one after
			// the Delete, of the deletion.
			if r := locateReply(t, out, replyTo("r2")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrLost) {
				t.Fatalf("Get of the lost object parked until the republication: %v, want LOST", r.GetError())
			}
			if r := locateReply(t, locate(tb, "lost", 2, t0), replyTo("r2")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrDeleted) {
				t.Fatalf("Get of the lost object after its Delete: %v, want DELETED", r.GetError())
			}
			if r := locateReply(t, out, replyTo("r3")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrDeleted) {
				t.Fatalf("Get of a lost object deleted before the move: %v, want DELETED", r.GetError())
			}
			if r := locateReply(t, locate(tb, "back", 4, t0), replyTo("r4")); r.GetError() != nil || r.GetSender().GetNodeId() != "n1" {
				t.Fatalf("Get of an object Put again during the move: %v, want n1's copy", r)
			}
			// A Delete of an id never Put still says so, unless a table of
			// the shard forgot objects.
			d := deleteAnswer(t, tb.onDelete(&messages.DeleteObject{ObjectId: "never"}, replyTo("d2")).Sends, replyTo("d2"))
			if got := messages.ErrOrNil(d.GetError()); tc.amnesy != (got == nil) || (!tc.amnesy && !errors.Is(got, messages.ErrNotFound)) {
				t.Fatalf("Delete of an id never Put (amnesic %v): %v", tc.amnesy, got)
			}
		})
	}
}

// A lost id that reaches the table after every store node republished
// (a keeper that answered late) is taken at once: a Get parked on it
// fails LOST rather than wait for its deadline.
func TestLateCarriedLossFailsParkedGets(t *testing.T) {
	tb := NewLocationTable(TableConfig{AwaitRepublish: true})
	tb.onRepublished()
	if out := locate(tb, "x", 1, t0); len(out) != 0 {
		t.Fatalf("a Locate of an unknown id answered %v, want it parked", out)
	}
	out := tb.onApplyTombstones(&messages.Tombstones{LostIds: []string{"x"}}).Sends
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrLost) {
		t.Fatalf("parked Locate: %v, want LOST", r.GetError())
	}
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrLost) {
		t.Fatalf("new Locate: %v, want LOST", r.GetError())
	}
}

// An earlier table's amnesia follows the shard: a Delete the new table
// holds until the republication is answered as an amnesic table answers
// it, and the table reports itself amnesic (so that its shell tells its
// own keeper).
func TestCarriedAmnesia(t *testing.T) {
	tb := NewLocationTable(TableConfig{AwaitRepublish: true})
	out := tb.onDelete(&messages.DeleteObject{ObjectId: "forgotten"}, replyTo("d"))
	out.Merge(tb.onApplyTombstones(&messages.Tombstones{Amnesic: true}))
	out.Merge(tb.onRepublished())
	if err := deleteAnswer(t, out.Sends, replyTo("d")).GetError(); err != nil {
		t.Fatalf("Delete of an id an earlier, amnesic table may have known: %v, want OK", err)
	}
	if !tb.Amnesic() {
		t.Fatal("the table does not report the amnesia it was told")
	}
}

// Past TombstoneLimit lost ids waiting for the republication the table
// keeps no more and is amnesic instead.
func TestCarriedLossesBeyondTheBound(t *testing.T) {
	tb := NewLocationTable(TableConfig{AwaitRepublish: true, TombstoneLimit: 2})
	tb.onApplyTombstones(&messages.Tombstones{LostIds: []string{"a", "b"}})
	if tb.Amnesic() {
		t.Fatal("amnesic within the bound")
	}
	tb.onApplyTombstones(&messages.Tombstones{LostIds: []string{"c"}})
	if !tb.Amnesic() {
		t.Fatal("not amnesic past the bound")
	}
	out := tb.onRepublished().Sends
	out = append(out, locate(tb, "a", 1, t0)...)
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrLost) {
		t.Fatalf("Get of a lost id within the bound: %v, want LOST", r.GetError())
	}
}
