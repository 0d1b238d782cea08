package directory

import (
	"errors"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// createComplete registers id's creator copy on node creator as whole.
func createComplete(t *testing.T, tb *LocationTable, id string, size int64, creator int) {
	t.Helper()
	create(t, tb, id, size, creator)
	tb.onPublish(&messages.PublishLocation{ObjectId: id, Node: node(creator), State: messages.LocationState_COMPLETE, Size: size, Fingerprint: 42, Creator: true})
}

// A receiver that names a creator's whole copy as its failed sender does
// not take that copy out of the directory: its stream error says nothing
// certain about the creator, and the copy, often the only one, would be
// offered to nobody again while its node lives (every later Get waited to
// its deadline). The receiver is sent to other copies first and back to
// the creator after AvoidFailedCreator; the creator's node failing still
// loses the object.
func TestFailedSenderReportKeepsAWholeCreatorCopy(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	createComplete(t, tb, "x", 1<<20, 0)
	if s := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1 from %s, want n0", s)
	}
	// n1's stream from n0 breaks; n0 lives.
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r1"), t0).Sends
	if r := outbox.SendsTo(out, replyTo("r1")); len(r) != 0 {
		t.Fatalf("n1 was sent back to the creator it named failed at once: %v", r)
	}
	// Everyone else still gets the creator's copy.
	if lr := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); lr.GetSender().GetNodeId() != "n0" {
		t.Fatalf("n2 got %v, want n0's copy", lr)
	}
	// Before AvoidFailedCreator, n1 is not sent to n0; n2's copy, fed by
	// n0, is another sender, which it may take.
	if r := outbox.SendsTo(tb.onTick(t0.Add(AvoidFailedCreator/2)).Sends, replyTo("r1")); len(r) != 0 {
		if s := r[0].Msg.(*messages.LocateReply).GetSender().GetNodeId(); s == "n0" {
			t.Fatalf("n1 was sent back to n0 before AvoidFailedCreator")
		}
	}

	// Alone with the creator: after AvoidFailedCreator the receiver is
	// sent back to it.
	tb = NewLocationTable(TableConfig{})
	createComplete(t, tb, "y", 1<<20, 0)
	locate(tb, "y", 1, t0)
	tb.onLocate(&messages.Locate{ObjectId: "y", Receiver: node(1), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r1"), t0)
	if r := outbox.SendsTo(tb.onTick(t0.Add(AvoidFailedCreator-1)).Sends, replyTo("r1")); len(r) != 0 {
		t.Fatalf("n1 answered before AvoidFailedCreator: %v", r)
	}
	if s := locateReply(t, tb.onTick(t0.Add(AvoidFailedCreator)).Sends, replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1 resumed from %s after AvoidFailedCreator, want n0", s)
	}

	// The creator's node failing loses the object; the avoiding receiver
	// hears it at once.
	tb = NewLocationTable(TableConfig{})
	createComplete(t, tb, "z", 1<<20, 0)
	locate(tb, "z", 1, t0)
	tb.onLocate(&messages.Locate{ObjectId: "z", Receiver: node(1), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r1"), t0)
	out = tb.onNodeFailed("n0").Sends
	if lr := locateReply(t, out, replyTo("r1")); !errors.Is(lr.GetError(), messages.ErrLost) {
		t.Fatalf("n1 after the creator's node failed: %v, want LOST", lr)
	}

	// A copy that is not a whole creator copy still leaves at once (the
	// receiver's report frees its chain, as before).
	tb = NewLocationTable(TableConfig{})
	createComplete(t, tb, "w", 1<<20, 0)
	locate(tb, "w", 1, t0) // n1 <- n0
	locate(tb, "w", 2, t0) // n2 <- n1
	tb.onLocate(&messages.Locate{ObjectId: "w", Receiver: node(2), TimeoutMs: 1000, FailedSender: node(1)}, replyTo("r2"), t0)
	info := tb.onQuery(&messages.QueryObject{ObjectId: "w"}, replyTo("q"), t0).Sends[0].Msg.(*messages.ObjectInfo)
	for _, l := range info.GetLocations() {
		if l.GetNode().GetNodeId() == "n1" {
			t.Fatalf("n1's partial copy, named failed, is still listed: %v", info)
		}
	}
}
