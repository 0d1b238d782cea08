package directory

import (
	"errors"
	"fmt"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// TestAnswerWithBytesKeepsTheQueueWithinItsBudget: the decision alone.
// The queue may hold InlineQueueCopies copies of a large inline object,
// or InlineQueueTime at the uplink of small ones, and drains at the
// uplink's rate.
func TestAnswerWithBytesKeepsTheQueueWithinItsBudget(t *testing.T) {
	const uplink = 50e6 // bytes per second: the testbed's 400 Mbit/s
	big := int64(63 << 10)
	for k := 0; k < InlineQueueCopies; k++ {
		if !AnswerWithBytes(float64(int64(k)*big), big, uplink) {
			t.Fatalf("S=%d: the bytes refused with %d copies queued; want them up to %d", big, k, InlineQueueCopies)
		}
	}
	if AnswerWithBytes(float64(InlineQueueCopies*big), big, uplink) {
		t.Fatalf("S=%d: the bytes with %d copies queued; want a holder past %d", big, InlineQueueCopies, InlineQueueCopies)
	}
	small := int64(1 << 10)
	floor := int64(InlineQueueTime.Seconds() * uplink / float64(small)) // copies of 1 KiB in InlineQueueTime
	if floor <= InlineQueueCopies {
		t.Fatalf("InlineQueueTime holds %d copies of 1 KiB at %v B/s; the test wants more than %d", floor, uplink, InlineQueueCopies)
	}
	if !AnswerWithBytes(float64((floor-1)*small), small, uplink) {
		t.Errorf("S=%d: the bytes refused with %d copies queued, within InlineQueueTime", small, floor-1)
	}
	if AnswerWithBytes(float64(floor*small), small, uplink) {
		t.Errorf("S=%d: the bytes with %d copies queued, past InlineQueueTime", small, floor)
	}
	if q := InlineQueued(100e3, t0, t0.Add(time.Millisecond), uplink); q != 50e3 {
		t.Errorf("100 kB queued drain to %v in 1 ms at %v B/s; want 50 kB", q, uplink)
	}
	if q := InlineQueued(100e3, t0, t0.Add(time.Second), uplink); q != 0 {
		t.Errorf("100 kB queued drain to %v in 1 s; want 0", q)
	}
	if q := InlineQueued(100e3, t0, t0.Add(-time.Second), uplink); q != 100e3 {
		t.Errorf("a time before the queue's drains it to %v; want it as it was", q)
	}
}

// answer describes a Locate's answer without the inline bytes.
func answer(lr *messages.LocateReply) string {
	switch {
	case lr.GetError() != nil:
		return fmt.Sprintf("error %v", lr.GetError())
	case lr.GetHasInline():
		return fmt.Sprintf("%d inline bytes", len(lr.GetInlineData()))
	}
	return fmt.Sprintf("sender %s (%v)", lr.GetSender().GetNodeId(), lr.GetSenderState())
}

// inlineTable is a table whose shard sends at uplink bytes per second,
// holding inline object "s" of size bytes created by n0, whole.
func inlineTable(t *testing.T, size int64, uplink float64) *LocationTable {
	t.Helper()
	tb := NewLocationTable(TableConfig{InlineUplink: uplink})
	out := tb.onCreate(&messages.CreateObject{ObjectId: "s", Size: size, Fingerprint: 7, Creator: node(0),
		HasInline: true, InlineData: make([]byte, size)}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("create: %v", out)
	}
	tb.onPublish(&messages.PublishLocation{ObjectId: "s", Node: node(0), State: messages.LocationState_COMPLETE, Size: size, Fingerprint: 7, Creator: true})
	return tb
}

// TestInlineAnswerIsAHolderPastTheUplinksBudget: the shard answers an
// inline object's Locates with its bytes while its uplink's queue of
// them is within InlineQueueBudget; past it, with a copy that holds the
// object, claimed as a streamed object's sender is (one receiver at a
// time, the receiver a partial copy fed by it); with the bytes again
// once the queue drained, and whenever no holder can serve: every one
// died, or the receiver's stream from one failed. A receiver a holder
// served completes as any fetch does, and a Delete reaches it.
func TestInlineAnswerIsAHolderPastTheUplinksBudget(t *testing.T) {
	const size = 10000
	const uplink = 1e6 // bytes per second: InlineQueueTime is 1000 bytes, under a copy
	tb := inlineTable(t, size, uplink)
	budget := int(InlineQueueBudget(size, uplink) / size)
	if budget != InlineQueueCopies {
		t.Fatalf("budget of %d copies, want InlineQueueCopies", budget)
	}
	recv := 1
	next := func(now time.Time) (int, *messages.LocateReply) {
		r := recv
		recv++
		return r, locateReply(t, locate(tb, "s", r, now), replyTo(fmt.Sprintf("r%d", r)))
	}
	for i := 0; i < budget; i++ {
		if r, lr := next(t0); !lr.GetHasInline() || len(lr.GetInlineData()) != size || lr.GetSender() != nil {
			t.Fatalf("receiver %d of %d within the budget: %v; want the bytes", r, budget, answer(lr))
		}
	}
	// Past the budget: the creator first (the oldest whole copy), then
	// the receivers that got the bytes, one receiver each.
	r1, lr := next(t0)
	if lr.GetHasInline() || lr.GetSender().GetNodeId() != "n0" || lr.GetSenderState() != messages.LocationState_COMPLETE || lr.GetEpoch() == 0 {
		t.Fatalf("receiver %d past the budget: %v; want the creator n0 as its sender, no bytes", r1, answer(lr))
	}
	r2, lr2 := next(t0)
	if lr2.GetHasInline() || lr2.GetSender().GetNodeId() != "n1" {
		t.Fatalf("receiver %d past the budget: %v; want n1, the first receiver that got the bytes (n0 serves n%d)", r2, answer(lr2), r1)
	}
	if l := locationOf(t, tb, "s", fmt.Sprintf("n%d", r1)); l.GetState() != messages.LocationState_PARTIAL {
		t.Fatalf("the receiver a holder serves is %v; want a partial copy", l.GetState())
	}
	// Its stream completes as a streamed object's does.
	tb.onFetchDone(fetchDoneIn("s", r1, 0, lr))
	if l := locationOf(t, tb, "s", fmt.Sprintf("n%d", r1)); l.GetState() != messages.LocationState_COMPLETE {
		t.Fatalf("after its FetchDone the relayed copy is %v; want complete", l.GetState())
	}

	// Drained: 20 ms at 1 MB/s took 20 kB of the queue, room for two copies.
	later := t0.Add(20 * time.Millisecond)
	for i := 0; i < 2; i++ {
		if r, lr := next(later); !lr.GetHasInline() {
			t.Fatalf("receiver %d once the queue drained: %v; want the bytes", r, answer(lr))
		}
	}
	if r, lr := next(later); lr.GetHasInline() {
		t.Fatalf("receiver %d with the queue full again: the bytes; want a holder", r)
	}

	// A receiver whose stream from a holder failed gets the bytes.
	r3, lr3 := next(later)
	if lr3.GetHasInline() {
		t.Fatalf("receiver %d: the bytes; want a holder", r3)
	}
	out := tb.onLocate(&messages.Locate{ObjectId: "s", Receiver: node(r3), TimeoutMs: 1000, FailedSender: lr3.GetSender(), Attempt: 2},
		replyTo("again"), later).Sends
	if lr := locateReply(t, out, replyTo("again")); !lr.GetHasInline() || len(lr.GetInlineData()) != size {
		t.Fatalf("receiver %d after its sender %s failed: %v; want the bytes", r3, lr3.GetSender().GetNodeId(), answer(lr))
	}

	// Every holder dies: the bytes, however full the queue; the receiver
	// that got them holds the object for the next.
	for n := 0; n < recv; n++ {
		tb.onNodeFailed(fmt.Sprintf("n%d", n))
	}
	r4, lr4 := next(later)
	if !lr4.GetHasInline() || len(lr4.GetInlineData()) != size {
		t.Fatalf("receiver %d with every holder dead: %v; want the bytes", r4, answer(lr4))
	}
	if r, lr := next(later); lr.GetSender().GetNodeId() != fmt.Sprintf("n%d", r4) {
		t.Fatalf("receiver %d after it: %v; want n%d as its sender", r, answer(lr), r4)
	}

	// A Delete drops every copy: those the bytes made and those relayed.
	tb = inlineTable(t, size, uplink)
	recv = 1
	var relayed []int
	for i := 0; i < budget+3; i++ {
		r, lr := next(t0)
		if !lr.GetHasInline() {
			tb.onFetchDone(&messages.FetchDone{ObjectId: "s", Receiver: node(r), Sender: lr.GetSender(), Size: size, Fingerprint: 7, Epoch: lr.GetEpoch()})
			relayed = append(relayed, r)
		}
	}
	if len(relayed) != 3 {
		t.Fatalf("relayed receivers %v, want the 3 past the budget", relayed)
	}
	out = tb.onDelete(&messages.DeleteObject{ObjectId: "s"}, replyTo("d")).Sends
	for n := 0; n < recv; n++ {
		if d := dropsTo(out, n); d == nil || !errors.Is(d.GetReason(), messages.ErrDeleted) {
			t.Errorf("Delete: no drop to n%d in %v", n, out)
		}
	}
}

// TestInlineNoCopyLocatePastTheBudget: a no-copy reader past the budget
// reads a holder and is recorded nowhere (as a no-copy reader of a
// streamed object).
func TestInlineNoCopyLocatePastTheBudget(t *testing.T) {
	const size = 10000
	tb := inlineTable(t, size, 1e6)
	for r := 1; r <= InlineQueueCopies; r++ {
		locateReply(t, locate(tb, "s", r, t0), replyTo(fmt.Sprintf("r%d", r)))
	}
	lr := locateReply(t, locateNoCopy(tb, "s", 20, "i20", t0), replyTo("i20"))
	if lr.GetHasInline() || lr.GetSender() == nil {
		t.Fatalf("no-copy reader past the budget: %v; want a holder", answer(lr))
	}
	for _, l := range queryInfo(t, tb, "s").GetLocations() {
		if l.GetNode().GetNodeId() == "n20" || l.GetServing() {
			t.Fatalf("the no-copy read left a trace: %v", l)
		}
	}
}

// TestInlineLocateUnderASenderPolicy: a table whose senders a policy
// chooses answers every Locate of an inline object with the bytes, past
// the budget too: the policy chooses among copies, and the shard's bytes
// are none.
func TestInlineLocateUnderASenderPolicy(t *testing.T) {
	const size = 10000
	tb := NewLocationTable(TableConfig{InlineUplink: 1e6, Senders: creatorOnly})
	tb.onCreate(&messages.CreateObject{ObjectId: "s", Size: size, Fingerprint: 7, Creator: node(0),
		HasInline: true, InlineData: make([]byte, size)}, replyTo("c"))
	tb.onPublish(&messages.PublishLocation{ObjectId: "s", Node: node(0), State: messages.LocationState_COMPLETE, Size: size, Fingerprint: 7, Creator: true})
	for r := 1; r <= InlineQueueCopies+2; r++ {
		if lr := locateReply(t, locate(tb, "s", r, t0), replyTo(fmt.Sprintf("r%d", r))); !lr.GetHasInline() {
			t.Fatalf("receiver %d: %v; want the bytes", r, answer(lr))
		}
	}
}

// TestCreateRecordsTheCopyCompleteWhenAsked: a registration that asks
// for it (CreateObject.complete, a fast Put's) records an inline
// creator's copy COMPLETE at once and says so in its reply; a streamed
// object's, an unoffered one's and one that does not ask stay PARTIAL
// until their COMPLETE publication, and their replies say nothing.
func TestCreateRecordsTheCopyCompleteWhenAsked(t *testing.T) {
	cases := []struct {
		name string
		req  *messages.CreateObject
		want bool
	}{
		{"inline, asked", &messages.CreateObject{HasInline: true, InlineData: make([]byte, 1024), Complete: true}, true},
		{"inline, not asked", &messages.CreateObject{HasInline: true, InlineData: make([]byte, 1024)}, false},
		{"streamed, asked", &messages.CreateObject{Complete: true}, false},
		{"inline unoffered, asked", &messages.CreateObject{HasInline: true, InlineData: make([]byte, 1024), Complete: true, Unoffered: true}, false},
	}
	for _, c := range cases {
		tb := NewLocationTable(TableConfig{})
		req := c.req
		req.ObjectId, req.Size, req.Fingerprint, req.Creator = "s", 1024, 7, node(0)
		out := tb.onCreate(req, replyTo("c")).Sends
		r := outbox.SendsTo(out, replyTo("c"))
		if len(r) != 1 {
			t.Fatalf("%s: create answered %v", c.name, out)
		}
		reply := r[0].Msg.(*messages.CreateObjectReply)
		if reply.GetError() != nil || reply.GetRecordedComplete() != c.want {
			t.Errorf("%s: reply %v, want recorded_complete %v", c.name, reply, c.want)
		}
		state := tb.entries["s"].locs[node(0).GetNodeId()].state
		want := messages.LocationState_PARTIAL
		if c.want {
			want = messages.LocationState_COMPLETE
		}
		if state != want {
			t.Errorf("%s: the creator's copy is %v, want %v", c.name, state, want)
		}
	}
}
