package directory

import (
	"github.com/hoplite-go/hoplite/internal/outbox"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A Subscribe with once_below whose answer carries the object's bytes
// leaves no subscription, and its last update says so; in every other
// case (no copy yet, bytes not under once_below, a subscriber that
// follows the object already, an object that is not inline) the
// subscription stands and no update is marked ended.
func TestSubscribeOnceEndsWithTheBytes(t *testing.T) {
	ended := func(out []any) (n int, last bool) {
		for i, m := range out {
			if u, ok := m.(*messages.LocationUpdate); ok && u.GetEnded() {
				n++
				last = i == len(out)-1
			}
		}
		return n, last
	}
	msgs := func(tb *LocationTable, id, key string, once int64) []any {
		var out []any
		for _, s := range tb.onSubscribe(&messages.Subscribe{ObjectId: id, OnceBelow: once}, key, replyTo(key)).Sends {
			out = append(out, s.Msg)
		}
		return out
	}

	tb := inlineTable(t, 1024, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "s", Node: node(1), State: messages.LocationState_COMPLETE, Size: 1024, Fingerprint: 7})
	out := msgs(tb, "s", "coord", 64<<10)
	if n, last := ended(out); len(out) != 2 || n != 1 || !last {
		t.Fatalf("answer %v: want both copies with the bytes, the last marked ended", out)
	}
	if u := out[0].(*messages.LocationUpdate); !u.GetHasInline() || len(u.GetInlineData()) != 1024 {
		t.Fatalf("the answer's first update carries no bytes: %v", u)
	}
	if tb.Subscribed("coord") {
		t.Fatal("the subscriber is subscribed after an answer that ended its subscription")
	}
	if out := tb.onFetchDone(fetchDone(tb, "s", node(2), node(0))).Sends; len(outbox.SendsTo(out, replyTo("coord"))) != 0 {
		t.Fatalf("a later copy was pushed to an ended subscription: %v", out)
	}

	for _, c := range []struct {
		name string
		id   string
		once int64
	}{
		{"bytes not under once_below", "s", 1024},
		{"no once_below", "s", 0},
		{"no copy yet", "later", 64 << 10},
	} {
		key := "coord-" + c.name
		if n, _ := ended(msgs(tb, c.id, key, c.once)); n != 0 || !tb.Subscribed(key) {
			t.Errorf("%s: %d updates ended, subscribed %v; want none ended, subscribed", c.name, n, tb.Subscribed(key))
		}
	}
	// A standing subscription stays one: a Subscribe with once_below of a
	// subscriber that follows the object asked for its every update.
	msgs(tb, "s", "standing", 0)
	if n, _ := ended(msgs(tb, "s", "standing", 64<<10)); n != 0 || !tb.Subscribed("standing") {
		t.Fatalf("a standing subscriber's Subscribe with once_below: %d ended, subscribed %v", n, tb.Subscribed("standing"))
	}

	big := NewLocationTable(TableConfig{})
	create(t, big, "x", 100, 0)
	if n, _ := ended(msgs(big, "x", "coord", 64<<10)); n != 0 || !big.Subscribed("coord") {
		t.Fatalf("an object without inline bytes: %d ended, subscribed %v", n, big.Subscribed("coord"))
	}
}
