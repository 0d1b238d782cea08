package directory

import (
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// at is node i's incarnation at address addr (the same id, another actor
// system: embedded clusters name their members alike in every process).
func at(i int, addr string) *messages.NodeRef {
	n := node(i)
	n.Address = addr
	return n
}

func locationOf(t *testing.T, tb *LocationTable, id, nodeID string) *messages.Location {
	t.Helper()
	for _, l := range queryInfo(t, tb, id).GetLocations() {
		if l.GetNode().GetNodeId() == nodeID {
			return l
		}
	}
	return nil
}

// A completion from another incarnation of a receiver (its id at another
// address) is not the completion of the copy this table records for the
// id: the late FetchDone or COMPLETE of an earlier incarnation's transfer
// must not mark the live incarnation's copy, which is still arriving,
// whole (Gets would be sent to a sender without the bytes). The live
// incarnation's own completion counts.
func TestCompletionOfAnotherIncarnationIsNotRecorded(t *testing.T) {
	for _, how := range []string{"FetchDone", "PublishLocation"} {
		tb := NewLocationTable(TableConfig{})
		create(t, tb, "x", 1<<20, 0)
		oldN1, newN1 := at(1, "old:1"), at(1, "new:2")
		if r := locateReply(t, tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: oldN1, TimeoutMs: 1000}, replyTo("old"), t0).Sends, replyTo("old")); r.GetSender().GetNodeId() != "n0" {
			t.Fatalf("%s: the old incarnation's Locate: %v", how, r)
		}
		// The id's new incarnation locates (the old one is gone): it is
		// the receiver now, and the sender is its.
		if r := locateReply(t, tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: newN1, TimeoutMs: 1000}, replyTo("new"), t0).Sends, replyTo("new")); r.GetSender().GetNodeId() != "n0" {
			t.Fatalf("%s: the new incarnation's Locate: %v", how, r)
		}
		late := func(n *messages.NodeRef) {
			if how == "FetchDone" {
				tb.onFetchDone(fetchDone(tb, "x", n, node(0)))
			} else {
				tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: n, State: messages.LocationState_COMPLETE, Size: 1 << 20, Fingerprint: 42})
			}
		}
		late(oldN1)
		if l := locationOf(t, tb, "x", "n1"); l == nil || l.GetState() != messages.LocationState_PARTIAL || l.GetNode().GetAddress() != "new:2" {
			t.Fatalf("%s: after the old incarnation's completion n1 is %v, want the new incarnation's partial copy", how, l)
		}
		late(newN1)
		if l := locationOf(t, tb, "x", "n1"); l == nil || l.GetState() != messages.LocationState_COMPLETE || l.GetNode().GetAddress() != "new:2" {
			t.Fatalf("%s: after the new incarnation's completion n1 is %v, want its complete copy", how, l)
		}
	}
}

// The failure of one incarnation of an id takes its copies and parked
// requests, not those of another incarnation of the id that located
// since (a late Terminated of the old one came after the new one's
// Locate).
func TestFailureOfAnIncarnationSparesAnother(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: at(1, "old:1"), TimeoutMs: 1000}, replyTo("old"), t0)
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: at(1, "new:2"), TimeoutMs: 1000}, replyTo("new"), t0)
	tb.onIncarnationFailed("n1", "old:1")
	if l := locationOf(t, tb, "x", "n1"); l == nil || l.GetNode().GetAddress() != "new:2" {
		t.Fatalf("after the old incarnation failed n1 is %v, want the new incarnation's copy", l)
	}
	tb.onIncarnationFailed("n1", "new:2")
	if l := locationOf(t, tb, "x", "n1"); l != nil {
		t.Fatalf("after the new incarnation failed n1 is still %v", l)
	}
}
