package directory

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A receiver whose member is dying sees every sender fail and names each
// one failed in turn (its streams broke; no sender said NOT_FOUND). The
// table struck the whole copies that had another beside them on that
// word alone, so the copies of two live members left the directory, and
// when the last listed copy was evicted the object was answered LOST
// while those members held it whole (chaos seed 5000184). A whole copy
// now stays listed until its node fails or says it has none: the
// receiver only avoids it for a while.
func TestAReceiversFailedSendersKeepTheirWholeCopies(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	createdOn(t, tb, "creator")
	for _, r := range []string{"a", "b"} {
		tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode(r), State: messages.LocationState_COMPLETE, Size: 1 << 20})
	}
	for _, failed := range []string{"a", "b", "creator", "a"} {
		req := &messages.Locate{ObjectId: "x", Receiver: cycleNode("dying"), FailedSender: cycleNode(failed), TimeoutMs: 60_000}
		for _, s := range tb.onLocate(req, "dying", t0).Sends {
			if r, ok := s.Msg.(*messages.LocateReply); ok && s.To == "dying" && r.GetError() == nil && r.GetSender().GetNodeId() == failed {
				t.Fatalf("the receiver that named %s failed was sent back to it at once", failed)
			}
		}
	}
	for _, n := range []string{"creator", "a", "b"} {
		if l := tb.entries["x"].locs[n]; l == nil || l.state != messages.LocationState_COMPLETE {
			t.Fatalf("%s's whole copy is no longer listed after the dying receiver named it failed", n)
		}
	}
	// The creator evicts its copy: a and b still hold the object whole.
	tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: cycleNode("creator")})
	tb.onNodeFailed("dying")
	res := tb.onQuery(&messages.QueryObject{ObjectId: "x"}, "q", t0)
	for _, s := range res.Sends {
		if info, ok := s.Msg.(*messages.ObjectInfo); ok {
			if err := messages.ErrOrNil(info.GetError()); errors.Is(err, messages.ErrLost) {
				t.Fatalf("the object is LOST while a and b hold it whole: %v", err)
			}
			if len(info.GetLocations()) != 2 {
				t.Fatalf("locations %v, want a's and b's", info.GetLocations())
			}
			return
		}
	}
	t.Fatalf("no answer to the Query: %v", res.Sends)
}
