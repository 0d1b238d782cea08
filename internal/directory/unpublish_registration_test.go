package directory

import (
	"github.com/hoplite-go/hoplite/internal/outbox"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A Put's first registration got no answer in time, so its node withdrew
// it (UnpublishLocation) and the Put was tried again. The withdrawal
// reached the shard only after the retry's registration and its whole
// copy: taken, it removed the object's only copy, and the object was
// LOST although its creator held it whole. A withdrawal names its
// registration, and leaves a later one alone; its own it still withdraws.
func TestStaleWithdrawalLeavesTheRetriedRegistration(t *testing.T) {
	const size = 1 << 20
	register := func(tb *LocationTable, id string, request uint64) {
		t.Helper()
		out := tb.onCreate(&messages.CreateObject{ObjectId: id, Size: size, Fingerprint: 42, Creator: node(0), RequestId: request}, replyTo("c")).Sends
		if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
			t.Fatalf("registration %d: %v", request, out)
		}
	}
	whole := func(tb *LocationTable, id string) {
		tb.onPublish(&messages.PublishLocation{ObjectId: id, Node: node(0), State: messages.LocationState_COMPLETE, Size: size, Fingerprint: 42, Creator: true})
	}
	withdraw := func(tb *LocationTable, id string, request uint64) {
		tb.onUnpublish(&messages.UnpublishLocation{ObjectId: id, Node: node(0), RequestId: request})
	}

	// The retry's copy is whole when the first attempt's withdrawal comes.
	tb := NewLocationTable(TableConfig{})
	register(tb, "x", 1)
	register(tb, "x", 2)
	whole(tb, "x")
	withdraw(tb, "x", 1)
	if lr := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); lr.GetError() != nil || lr.GetSender().GetNodeId() != "n0" {
		t.Fatalf("Get after a stale withdrawal of the whole retried copy: %v, want n0's copy", lr)
	}

	// The retry's copy is still being filled: receivers are offered it.
	tb = NewLocationTable(TableConfig{})
	register(tb, "y", 1)
	register(tb, "y", 2)
	withdraw(tb, "y", 1)
	if lr := locateReply(t, locate(tb, "y", 1, t0), replyTo("r1")); lr.GetError() != nil || lr.GetSender().GetNodeId() != "n0" {
		t.Fatalf("Get after a stale withdrawal of the retried copy being filled: %v, want n0's copy", lr)
	}

	// A withdrawal of the registration that stands takes it (the object
	// is not born yet: a Put of it may come).
	tb = NewLocationTable(TableConfig{})
	listed := func(id string) bool {
		e := tb.entries[id]
		return e != nil && e.locs["n0"] != nil
	}
	register(tb, "z", 1)
	withdraw(tb, "z", 1)
	if listed("z") {
		t.Fatal("the withdrawal of the registration that stands left its copy listed")
	}
	// The retry's registration after it stays, the stale withdrawal
	// delivered again notwithstanding.
	register(tb, "z", 2)
	whole(tb, "z")
	withdraw(tb, "z", 1)
	if !listed("z") {
		t.Fatal("a stale withdrawal, delivered again, removed the retried copy")
	}
	// An eviction (no registration named) still removes the copy.
	withdraw(tb, "z", 0)
	if listed("z") {
		t.Fatal("an Unpublish that names no registration left the copy listed")
	}
}

// The shard moved while a Put was retried: the retry's copy reached the
// new table by the creator's republication, before the retry's
// CreateObject, and the first attempt's withdrawal came between them.
// The republished copy named no registration, so the withdrawal took it
// (and a Get in that window found no copy). It names its registration
// now, and a withdrawal of another leaves it.
func TestStaleWithdrawalLeavesTheRepublishedRetry(t *testing.T) {
	const size = 1 << 20
	for _, tc := range []struct {
		name         string
		registration uint64 // the republished copy's
		stays        bool
	}{{"the retry's copy", 2, true}, {"the first attempt's copy", 1, false}} {
		t.Run(tc.name, func(t *testing.T) {
			tb := NewLocationTable(TableConfig{AwaitRepublish: true})
			tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_PARTIAL, Size: size,
				Fingerprint: 42, Creator: true, Registration: tc.registration})
			tb.onRepublished()
			tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(0), RequestId: 1})
			e := tb.entries["x"]
			if listed := e != nil && e.locs["n0"] != nil; listed != tc.stays {
				t.Fatalf("after the first attempt's withdrawal the creator's copy is listed: %v, want %v", listed, tc.stays)
			}
			// The retry's CreateObject comes last, either way.
			out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: size, Fingerprint: 42, Creator: node(0), RequestId: 2}, replyTo("c")).Sends
			if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
				t.Fatalf("the retry's registration: %v", out)
			}
			if lr := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); lr.GetError() != nil || lr.GetSender().GetNodeId() != "n0" {
				t.Fatalf("Get after the retry registered: %v, want n0's copy", lr)
			}
		})
	}
}
