package directory

import (
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A receiver whose fetch ended while its Locate's answer was on its way
// (a DropObject overtook it) names that attempt: the shard frees that
// claim, so the sender serves the next receiver, and an older attempt's
// abort, or one after the node located again, changes nothing.
func TestFetchAbortedOfAnAttemptFreesOnlyItsClaim(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000, Attempt: 7}, replyTo("r1"), t0)

	tb.onFetchAborted(&messages.FetchAborted{ObjectId: "x", Receiver: node(1), Attempt: 6})
	if l := tb.entries["x"].locs["n1"]; l == nil || l.fetchingFrom != "n0" {
		t.Fatalf("an older attempt's abort removed the claim: %+v", l)
	}
	// n0 serves n1, so n2 is sent to n1's partial copy.
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n2's sender %s, want n1 (n0 serves n1)", s)
	}
	tb.onFetchAborted(&messages.FetchAborted{ObjectId: "x", Receiver: node(1), Attempt: 7})
	if l := tb.entries["x"].locs["n1"]; l != nil {
		t.Fatalf("the attempt's abort left n1's record: %+v", l)
	}
	if s := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n3's sender %s, want n0, freed by n1's abort", s)
	}

	// An abort that names an attempt never removes a whole copy.
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(4), TimeoutMs: 1000, Attempt: 9}, replyTo("r4"), t0)
	tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(4), Sender: node(1), Size: 1 << 20})
	tb.onFetchAborted(&messages.FetchAborted{ObjectId: "x", Receiver: node(4), Attempt: 9})
	if l := tb.entries["x"].locs["n4"]; l == nil || l.state != messages.LocationState_COMPLETE {
		t.Fatalf("an attempt's abort removed a whole copy: %+v", l)
	}
}
