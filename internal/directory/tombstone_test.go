package directory

import (
	"errors"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"math"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// A rebuilt table (a shard that restarted or moved) learns deletions back
// from the store nodes: the id is DELETED for Put, Get, Query and
// publications, as it was before the rebuild.
func TestApplyTombstonesRestoresDeletions(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if out := tb.onApplyTombstones(&messages.Tombstones{ObjectIds: []string{"x", ""}}).Sends; len(out) != 0 {
		t.Fatalf("tombstones of unknown ids sent %v", out)
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1, Creator: node(0)}, replyTo("c")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("put after restored tombstone: %v", r)
	}
	if r := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("get after restored tombstone: %v", r)
	}
	out = tb.onQuery(&messages.QueryObject{ObjectId: "x"}, replyTo("q"), t0).Sends
	if info := out[0].Msg.(*messages.ObjectInfo); !errors.Is(info.GetError(), messages.ErrDeleted) {
		t.Fatalf("query after restored tombstone: %v", info)
	}
	if d := dropsTo(complete(tb, "x", 2, 100, false), 2); d == nil {
		t.Fatal("a copy published after the tombstone was not dropped")
	}
	// Several nodes send the same deletion: it is one tombstone.
	tb.onApplyTombstones(&messages.Tombstones{ObjectIds: []string{"x"}})
	if len(tb.tombstones) != 1 || len(tb.tombOrder) != 1 {
		t.Fatalf("tombstones %d, order %d: want 1", len(tb.tombstones), len(tb.tombOrder))
	}
}

// What the rebuilt table learned before the tombstone arrived is deleted
// as a Delete would have: waiting Gets and Queries fail with DELETED,
// subscribers hear it, republished copies are dropped; a lost id becomes
// a deleted one.
func TestApplyTombstonesEndsWhatArrivedBefore(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	complete(tb, "x", 0, 100, true)
	locate(tb, "x", 1, t0) // n1 fetches from n0
	tb.onLocate(&messages.Locate{ObjectId: "w", Receiver: node(2), TimeoutMs: 1000}, replyTo("rw"), t0)
	tb.onQuery(&messages.QueryObject{ObjectId: "w", Wait: true, TimeoutMs: 1000}, replyTo("qw"), t0)
	sub := replyTo("sub")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "w"}, "sub", sub)
	// "l" is lost: its only copy's node failed.
	complete(tb, "l", 3, 100, false)
	tb.onNodeFailed("n3")

	out := tb.onApplyTombstones(&messages.Tombstones{ObjectIds: []string{"x", "w", "l"}}).Sends
	for _, n := range []int{0, 1} {
		if d := dropsTo(out, n); d == nil || d.GetObjectId() != "x" || !errors.Is(d.GetReason(), messages.ErrDeleted) {
			t.Fatalf("no DELETED drop of x's copy on n%d: %v", n, out)
		}
	}
	if r := locateReply(t, out, replyTo("rw")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("parked Get: %v", r)
	}
	if q := outbox.SendsTo(out, replyTo("qw")); len(q) != 1 || !errors.Is(q[0].Msg.(*messages.ObjectInfo).GetError(), messages.ErrDeleted) {
		t.Fatalf("parked Query: %v", q)
	}
	if u := outbox.SendsTo(out, sub); len(u) != 1 || !u[0].Msg.(*messages.LocationUpdate).GetDeleted() {
		t.Fatalf("subscriber: %v", u)
	}
	for _, id := range []string{"x", "w", "l"} {
		if r := locateReply(t, locate(tb, id, 4, t0), replyTo("r4")); !errors.Is(r.GetError(), messages.ErrDeleted) {
			t.Fatalf("get %s: %v", id, r)
		}
	}
	if tb.Len() != 0 {
		t.Fatalf("entries left: %d", tb.Len())
	}
}

// Restored tombstones are bounded like those of Deletes.
func TestApplyTombstonesIsBounded(t *testing.T) {
	tb := NewLocationTable(TableConfig{TombstoneLimit: 2})
	tb.onApplyTombstones(&messages.Tombstones{ObjectIds: []string{"a", "b", "c"}})
	if _, ok := tb.tombstones["a"]; ok || len(tb.tombstones) != 2 {
		t.Fatalf("tombstones %v: want b and c", tb.tombstones)
	}
}

func TestTimeoutClamps(t *testing.T) {
	for _, c := range []struct {
		ms   int64
		want time.Duration
	}{
		{0, 7 * time.Second},
		{-5, 7 * time.Second},
		{1, time.Millisecond},
		{90_000, 90 * time.Second},
		{MaxTimeout.Milliseconds() - 1, MaxTimeout - time.Millisecond},
		{MaxTimeout.Milliseconds(), MaxTimeout},
		{1 << 62, MaxTimeout},
		{math.MaxInt64, MaxTimeout},
	} {
		if got := Timeout(c.ms, 7*time.Second); got != c.want {
			t.Errorf("Timeout(%d) = %v, want %v", c.ms, got, c.want)
		}
	}
}

// A huge timeout_ms waits (it used to overflow into a deadline in the
// past and time out at the first tick).
func TestHugeTimeoutsWait(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	for i, ms := range []int64{1 << 62, math.MaxInt64} {
		tb.onLocate(&messages.Locate{ObjectId: "later", Receiver: node(i + 1), TimeoutMs: ms}, replyTo("r"), t0)
		tb.onQuery(&messages.QueryObject{ObjectId: "later", Wait: true, TimeoutMs: ms}, replyTo("q"), t0)
	}
	if out := tb.onTick(t0.Add(24 * time.Hour)).Sends; len(out) != 0 {
		t.Fatalf("a day later, huge timeouts expired: %v", out)
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "later", Size: 10, Creator: node(0)}, replyTo("c")).Sends
	served := 0
	for _, s := range out {
		switch m := s.Msg.(type) {
		case *messages.LocateReply:
			if m.GetError() != nil {
				t.Fatalf("parked Get: %v", m)
			}
			served++
		case *messages.ObjectInfo:
			if m.GetError() != nil || m.GetSize() != 10 {
				t.Fatalf("parked Query: %v", m)
			}
			served++
		}
	}
	if served != 4 {
		t.Fatalf("served %d of 4 parked requests: %v", served, out)
	}
}

// A drop for a deletion says DELETED (store nodes remember those ids for
// rebuilt shards); a drop of a copy whose size disagrees with the
// directory's carries no reason, so that nobody takes the id as deleted.
func TestOnlyDeletionDropsSayDeleted(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	complete(tb, "x", 0, 100, true)
	if d := dropsTo(complete(tb, "x", 1, 99, false), 1); d == nil || d.GetReason() != nil {
		t.Fatalf("size mismatch drop: %v", d)
	}
	out := tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d")).Sends
	if d := dropsTo(out, 0); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
		t.Fatalf("Delete's drop: %v", d)
	}
	if d := dropsTo(complete(tb, "x", 2, 100, false), 2); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
		t.Fatalf("drop of a copy published after the Delete: %v", d)
	}
	if d := dropsTo(tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(3), Size: 100}).Sends, 3); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
		t.Fatalf("drop of a fetch finished after the Delete: %v", d)
	}
}
