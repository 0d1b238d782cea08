package directory

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

func cycleNode(id string) *messages.NodeRef {
	return &messages.NodeRef{NodeId: id, ActorId: id + "/store"}
}

// locateFor asks for receiver and returns the sender named in its reply
// among out ("" if none answered it).
func locateFor(t *testing.T, tb *LocationTable, receiver, failed string, now time.Time) string {
	t.Helper()
	req := &messages.Locate{ObjectId: "x", Receiver: cycleNode(receiver), TimeoutMs: 60_000}
	if failed != "" {
		req.FailedSender = cycleNode(failed)
	}
	return answered(t, tb.onLocate(req, receiver, now).Sends, receiver)
}

func answered(t *testing.T, out []outbox.Send, receiver string) string {
	t.Helper()
	for _, s := range out {
		if r, ok := s.Msg.(*messages.LocateReply); ok && s.To == receiver {
			if r.GetError() != nil {
				t.Fatalf("%s: %v", receiver, r.GetError())
			}
			return r.GetSender().GetNodeId()
		}
	}
	return ""
}

func createdOn(t *testing.T, tb *LocationTable, creator string) {
	t.Helper()
	tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Creator: cycleNode(creator)}, nil)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode(creator), State: messages.LocationState_COMPLETE,
		Size: 1 << 20, Creator: true})
}

// A partial copy republished after the shard restarted has an unknown
// sender: it is not offered until it completes.
func TestRepublishedPartialCopyIsNoSenderUntilComplete(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := DefaultTableConfig()
	cfg.Amnesic = true
	tb := NewLocationTable(cfg)
	createdOn(t, tb, "c")
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode("a"), State: messages.LocationState_PARTIAL, Size: 1 << 20})
	if got := locateFor(t, tb, "z", "", now); got != "c" {
		t.Fatalf("z fetches from %q, want the complete c", got)
	}
	for _, r := range []string{"b", "q"} {
		if got := locateFor(t, tb, r, "", now); got == "a" {
			t.Fatalf("%s was offered a, a republished partial copy whose sender is unknown", r)
		}
	}
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode("a"), State: messages.LocationState_COMPLETE, Size: 1 << 20})
	if got := locateFor(t, tb, "r", "", now); got != "a" {
		t.Fatalf("once a is complete r fetches from %q, want a", got)
	}
}
