package directory

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Parked requests for ids that never appear add entries only up to
// MaxEntries, and park on one object only up to MaxWaitersPerObject;
// past either a Locate and a waiting Query are answered
// RESOURCE_EXHAUSTED at once, while a Put and a Get of an object the
// table holds still go through, and an entry freed by a deadline makes
// room again.
func TestParkedRequestsBounded(t *testing.T) {
	tb := NewLocationTable(TableConfig{MaxEntries: 8, MaxWaitersPerObject: 3})
	create(t, tb, "held", 1<<20, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "held", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
	for i := range 7 {
		if out := locate(tb, fmt.Sprint("never-", i), i+1, t0); len(out) != 0 {
			t.Fatalf("a Locate of an absent id was answered at once: %v", out[0].Msg)
		}
	}
	exhausted := func(what string, err *messages.Error) {
		t.Helper()
		if !errors.Is(err, messages.ErrResourceExhausted) {
			t.Fatalf("%s: %v, want RESOURCE_EXHAUSTED", what, err)
		}
	}
	exhausted("a Locate past MaxEntries", locateReply(t, locate(tb, "never-7", 9, t0), replyTo("r9")).GetError())
	out := tb.onQuery(&messages.QueryObject{ObjectId: "never-8", Wait: true, TimeoutMs: 1000}, replyTo("q"), t0).Sends
	if len(out) != 1 {
		t.Fatalf("a waiting Query past MaxEntries parked")
	}
	exhausted("a waiting Query past MaxEntries", out[0].Msg.(*messages.ObjectInfo).GetError())
	// What the table holds is still served.
	if s := locateReply(t, locate(tb, "held", 10, t0), replyTo("r10")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("a Locate of a held object: sender %s, want n0", s)
	}
	// Three receivers wait on one absent id; the fourth is refused.
	for r := 20; r < 22; r++ {
		if out := locate(tb, "never-0", r, t0); len(out) != 0 {
			t.Fatalf("receiver %d was answered at once: %v", r, out[0].Msg)
		}
	}
	exhausted("a Locate past MaxWaitersPerObject", locateReply(t, locate(tb, "never-0", 22, t0), replyTo("r22")).GetError())
	// Their deadlines pass: the entries go, and new ids park again.
	tb.onTick(t0.Add(2 * time.Second))
	if out := locate(tb, "never-9", 30, t0.Add(2*time.Second)); len(out) != 0 {
		t.Fatalf("after the deadlines, a Locate of an absent id was answered at once: %v", out[0].Msg)
	}
}

// One object's subscribers are bounded; DropSubscriber ends every
// subscription of a key, and frees its place.
func TestSubscribersBoundedAndDropped(t *testing.T) {
	tb := NewLocationTable(TableConfig{MaxSubscribersPerObject: 2})
	sub := func(id, key string) *messages.Error {
		for _, s := range tb.onSubscribe(&messages.Subscribe{ObjectId: id}, key, replyTo(key)).Sends {
			if u, ok := s.Msg.(*messages.LocationUpdate); ok && u.GetError() != nil {
				return u.GetError()
			}
		}
		return nil
	}
	if sub("x", "a") != nil || sub("x", "b") != nil || sub("y", "a") != nil {
		t.Fatal("refused below the bound")
	}
	if err := sub("x", "c"); !errors.Is(err, messages.ErrResourceExhausted) {
		t.Fatalf("a third subscriber of x: %v, want RESOURCE_EXHAUSTED", err)
	}
	if err := sub("x", "a"); err != nil {
		t.Fatalf("a subscriber subscribing again is refused: %v", err)
	}
	tb.DropSubscriber("a")
	if tb.Subscribed("a") {
		t.Fatal("a is still subscribed after DropSubscriber")
	}
	if err := sub("x", "c"); err != nil {
		t.Fatalf("after a was dropped, c is refused: %v", err)
	}
	if _, ok := tb.entries["y"]; ok {
		t.Fatal("y, followed only by a, kept its entry after a was dropped")
	}
}
