package directory

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// noLoss fails the test if out answers anything LOST or drops a copy.
func noLoss(t *testing.T, what string, out []outbox.Send) {
	t.Helper()
	for _, s := range out {
		var err *messages.Error
		switch m := s.Msg.(type) {
		case *messages.LocateReply:
			err = m.GetError()
		case *messages.ObjectInfo:
			err = m.GetError()
		case *messages.LocationUpdate:
			err = m.GetError()
		case *messages.DropObject:
			t.Fatalf("%s: a copy was dropped: %v", what, s)
		}
		if errors.Is(err, messages.ErrLost) {
			t.Fatalf("%s: answered LOST: %v", what, s)
		}
	}
}

// relocate is receiver's Locate after its stream from failed ended short
// (lacks: failed's node said it has no such object).
func relocate(tb *LocationTable, id string, receiver, failed int, lacks bool, now time.Time) []outbox.Send {
	return tb.onLocate(&messages.Locate{ObjectId: id, Receiver: node(receiver), TimeoutMs: 1000, FailedSender: node(failed),
		FailedSenderLacks: lacks}, replyTo(fmt.Sprintf("r%d", receiver)), now).Sends
}

// A Put's registration failed (a member died) while its client retried
// the Put: the first attempt withdraws its creator copy, which was never
// whole, and the shard must not take that for the last copy going. Gets
// waiting for the object keep waiting and are served by the retry's copy
// (chaos seed 180: "the last was on node-6, which failed or let it go",
// and node-6's retried Put then answered OK).
func TestWithdrawnRegistrationOfARetriedPutIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0) // the first attempt's registration
	if s := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1's sender %s, want the creator", s)
	}
	noLoss(t, "the first attempt withdraws", tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(0)}).Sends)
	// n1's stream ends: n0 dropped the failed attempt's copy.
	out := relocate(tb, "x", 1, 0, true, t0)
	noLoss(t, "n1 locates again", out)
	if r := outbox.SendsTo(out, replyTo("r1")); len(r) != 0 {
		t.Fatalf("n1 answered with no copy to read: %v", r)
	}
	out = locate(tb, "x", 2, t0)
	noLoss(t, "a Get on n2", out)
	out = append(out, tb.onQuery(&messages.QueryObject{ObjectId: "x", Wait: true, TimeoutMs: 1000}, replyTo("q"), t0).Sends...)
	noLoss(t, "a Query", out)
	tb.onNodeFailed("n9") // an unrelated failure settles nothing
	// The retry registers again: the waiting Gets stream from it.
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Fingerprint: 42, Creator: node(0)}, replyTo("c")).Sends
	noLoss(t, "the retry registers", out)
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil ||
		r[0].Msg.(*messages.CreateObjectReply).GetExisted() {
		t.Fatalf("the retry's CreateObject: %v, want it registered as the creator", r)
	}
	for _, n := range []int{1, 2} {
		if r := locateReply(t, out, replyTo(fmt.Sprintf("r%d", n))); r.GetError() != nil || r.GetSender() == nil {
			t.Fatalf("n%d after the retry registered: %v", n, r)
		}
	}
	complete(tb, "x", 0, 1<<20, true)
	if _, lost := tb.lost["x"]; lost {
		t.Fatal("x is marked lost")
	}
}

// The same Put's withdrawal and its retry's registration may cross: the
// stale withdrawal removes the retry's creator copy. Nothing is lost; the
// Gets wait for the retry's whole copy.
func TestStaleWithdrawalCrossingTheRetryIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	locate(tb, "x", 1, t0)       // n1 streams from the first attempt's copy
	create(t, tb, "x", 1<<20, 0) // the retry, before the withdrawal
	out := tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(0)}).Sends
	noLoss(t, "the stale withdrawal", out)
	out = locate(tb, "x", 2, t0)
	noLoss(t, "a Get after the withdrawal", out)
	out = complete(tb, "x", 0, 1<<20, true) // the retry's copy is whole
	noLoss(t, "the retry publishes", out)
	if r := locateReply(t, out, replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("the waiting Get after the retry's copy is whole: %v", r)
	}
	// Whole once, it is lost with its last copy once no copy that
	// streamed from it may be whole.
	out = tb.onNodeFailed("n0").Sends
	out = append(out, relocate(tb, "x", 1, 0, false, t0)...)
	out = append(out, relocate(tb, "x", 2, 0, false, t0)...)
	for _, n := range []int{1, 2} {
		if r := locateReply(t, out, replyTo(fmt.Sprintf("r%d", n))); !errors.Is(r.GetError(), messages.ErrLost) {
			t.Fatalf("n%d after the whole copy's node failed: %v, want LOST", n, r)
		}
	}
}

// A Put that failed for good leaves its waiters to their deadlines (not
// LOST) and the table forgets the id; a Put of other bytes is no
// conflict, and the failed attempt's partial copies are dropped.
func TestWithdrawnRegistrationWaitsForItsDeadlineOrAnotherPut(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(0)})
	out := locate(tb, "x", 1, t0)
	noLoss(t, "a Get after the withdrawal", out)
	out = tb.onTick(t0.Add(time.Second)).Sends
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrTimeout) {
		t.Fatalf("the waiting Get at its deadline: %v, want TIMEOUT", r)
	}
	if n := tb.Len(); n != 0 {
		t.Fatalf("%d entries left after the failed Put's last waiter went", n)
	}

	tb = NewLocationTable(TableConfig{})
	create(t, tb, "y", 1<<20, 0)
	locate(tb, "y", 1, t0) // n1 streams from the failed attempt
	tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "y", Node: node(0)})
	out = tb.onCreate(&messages.CreateObject{ObjectId: "y", Size: 1 << 10, Fingerprint: 7, Creator: node(3)}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("a Put of other bytes after a failed one: %v, want it created", out)
	}
	if d := dropsTo(out, 1); d == nil || !errors.Is(d.GetReason(), messages.ErrReset) {
		t.Fatalf("the failed attempt's partial copy on n1: drop %v, want RESET", d)
	}
	if i := queryInfo(t, tb, "y"); i.GetSize() != 1<<10 || len(i.GetLocations()) != 1 {
		t.Fatalf("after the new Put: %v", i)
	}
}

// Readers' Gets return the object whole just as its last whole copy's
// node dies, their completion reports still on the way: the shard still
// lists their copies as partial when it applies the failure. Those copies
// may be whole, so the object is in doubt, not lost, and the reports
// bring it back: no Get hears LOST, no copy is dropped, and a Reduce
// subscribed to it as a source keeps it (chaos seeds 140, 212, 80).
func TestReadersWholeAsTheirSenderDiesKeepTheObject(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	createComplete(t, tb, "x", 1<<20, 0)
	sub := replyTo("coord")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", sub)
	locate(tb, "x", 1, t0) // n1 <- n0
	locate(tb, "x", 2, t0) // n2 <- n1
	out := tb.onNodeFailed("n0").Sends
	noLoss(t, "the sender's node fails", out)
	if d := tb.nextDeadline; d.IsZero() || d.After(t0) {
		t.Fatalf("NextDeadline %v after a doubt began, want one already past (the grace needs the time)", d)
	}
	out = tb.onTick(t0).Sends
	out = append(out, locate(tb, "x", 3, t0)...)
	noLoss(t, "a Get in the doubt", out)
	if r := outbox.SendsTo(out, replyTo("r3")); len(r) != 0 {
		t.Fatalf("n3 answered while no copy is known whole: %v", r)
	}
	out = tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(1), Sender: node(0), Size: 1 << 20, Fingerprint: 42, Epoch: tb.entries["x"].epoch}).Sends
	noLoss(t, "n1's FetchDone", out)
	if r := locateReply(t, out, replyTo("r3")); r.GetError() != nil || r.GetSender() == nil {
		t.Fatalf("the waiting Get once n1 reported its copy whole: %v", r)
	}
	if got := updates(out, sub); len(got) == 0 || got[0].GetNode().GetNodeId() != "n1" || got[0].GetState() != messages.LocationState_COMPLETE {
		t.Fatalf("the subscriber heard %v, want n1 COMPLETE first", got)
	}
	noLoss(t, "past the grace", tb.onTick(t0.Add(2*DefaultLossGrace)).Sends)
	out = tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(2), Sender: node(1), Size: 1 << 20, Fingerprint: 42, Epoch: tb.entries["x"].epoch}).Sends
	noLoss(t, "n2's FetchDone", out)
	info := queryInfo(t, tb, "x")
	whole := 0
	for _, l := range info.GetLocations() {
		if l.GetState() == messages.LocationState_COMPLETE {
			whole++
		}
	}
	if whole != 2 {
		t.Fatalf("after both reports: %v, want n1 and n2 whole", info)
	}
}

// A doubt ends in LOST when no copy that may be whole is left (each
// receiver located again, its stream having ended short), or when the
// grace passes without a report.
func TestDoubtEndsInLossWithoutAWholeCopy(t *testing.T) {
	const grace = 100 * time.Millisecond
	tb := NewLocationTable(TableConfig{LossGrace: grace})
	createComplete(t, tb, "x", 1<<20, 0)
	locate(tb, "x", 1, t0) // n1 <- n0
	locate(tb, "x", 2, t0) // n2 <- n1
	noLoss(t, "n0 fails", tb.onNodeFailed("n0").Sends)
	out := relocate(tb, "x", 1, 0, false, t0)
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n1's Locate after its stream from n0 ended short: %v, want LOST", r)
	}
	for _, n := range []int{1, 2} {
		if d := dropsTo(out, n); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
			t.Fatalf("n%d's partial copy: drop %v, want LOST", n, d)
		}
	}

	tb = NewLocationTable(TableConfig{LossGrace: grace})
	createComplete(t, tb, "y", 1<<20, 0)
	locate(tb, "y", 1, t0)
	noLoss(t, "n0 fails", tb.onNodeFailed("n0").Sends)
	locate(tb, "y", 2, t0) // parks: n1's copy has no live upstream
	noLoss(t, "the grace starts", tb.onTick(t0).Sends)
	noLoss(t, "within the grace", tb.onTick(t0.Add(grace-1)).Sends)
	out = tb.onTick(t0.Add(grace)).Sends
	if r := locateReply(t, out, replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("the waiting Get once the grace passed: %v, want LOST", r)
	}
	if d := dropsTo(out, 1); d == nil {
		t.Fatalf("n1's partial copy not dropped once the grace passed: %v", out)
	}
	if r := locateReply(t, locate(tb, "y", 3, t0.Add(grace)), replyTo("r3")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("a Get after the loss: %v, want LOST", r)
	}
}

// A receiver's stream from a registering creator's copy fails (the Put's
// registration failed and dropped the copy, with an error other than
// NOT_FOUND), and the receiver names the creator failed before the
// creator's withdrawal arrives: the creator's copy goes on the
// receiver's word, and neither that nor the withdrawal after it makes
// the object lost (chaos seed 180 again, with the withdrawal already
// tolerated).
func TestCreatorNamedFailedBeforeItsWithdrawalIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	locate(tb, "x", 1, t0) // n1 <- n0
	out := relocate(tb, "x", 1, 0, false, t0)
	noLoss(t, "n1 names the creator failed", out)
	out = tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(0)}).Sends
	noLoss(t, "the creator's withdrawal", out)
	out = locate(tb, "x", 2, t0)
	noLoss(t, "a Get after the withdrawal", out)
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Fingerprint: 42, Creator: node(0)}, replyTo("c")).Sends
	noLoss(t, "the retry registers", out)
	for _, n := range []int{1, 2} {
		if r := locateReply(t, out, replyTo(fmt.Sprintf("r%d", n))); r.GetError() != nil || r.GetSender() == nil {
			t.Fatalf("n%d after the retry registered: %v", n, r)
		}
	}
}

// A rebuilt shard found an object lost (it knew only receivers' partial
// copies, which located again), and then learns of a Put of it still
// copying: the creator's republished partial copy. That Put re-creates
// the id, as its CreateObject would; dropped, the Put answered LOST
// (chaos seed 239).
func TestCreatorsPartialCopyEndsALoss(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(1), State: messages.LocationState_PARTIAL, Size: 1 << 20, Fingerprint: 42})
	tb.onRepublished()
	out := relocate(tb, "x", 1, 4, false, t0) // n1's stream from n4 ended short
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n1's Locate: %v, want LOST", r)
	}
	out = tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(4), State: messages.LocationState_PARTIAL, Size: 1 << 20, Fingerprint: 42, Creator: true}).Sends
	if d := dropsTo(out, 4); d != nil {
		t.Fatalf("the creator's copy of a Put under way was dropped: %v", d)
	}
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); r.GetError() != nil || r.GetSender().GetNodeId() != "n4" {
		t.Fatalf("a Get after the creator's publication: %v, want the creator's copy", r)
	}
	// A receiver's partial copy still cannot end a loss.
	tb.onNodeFailed("n4")
	tb.onNodeFailed("n2")
	out = tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(3), State: messages.LocationState_PARTIAL, Size: 1 << 20, Fingerprint: 42}).Sends
	if d := dropsTo(out, 3); d == nil || !errors.Is(d.GetReason(), messages.ErrLost) {
		t.Fatalf("a receiver's partial copy of a lost object: %v, want a drop with LOST", out)
	}
}

// A receiver names a creator's copy still being Put a failed sender (its
// stream ended, the creator lives), and then another receiver's member
// dies: the object is not lost, for the creator's Put is under way, and
// its copy serves once it is published whole. Only the creator's own
// failure loses it then.
func TestReceiversFailureAfterTheCreatorWasNamedFailedIsNotLost(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	locate(tb, "x", 1, t0) // n1 <- n0
	locate(tb, "x", 2, t0) // n2 <- n1
	noLoss(t, "n1 names the creator failed", relocate(tb, "x", 1, 0, false, t0))
	noLoss(t, "n2's member fails", tb.onNodeFailed("n2").Sends)
	out := locate(tb, "x", 3, t0)
	noLoss(t, "a Get after n2's failure", out)
	out = complete(tb, "x", 0, 1<<20, true) // the Put's copy is whole after all
	noLoss(t, "the creator publishes its whole copy", out)
	if r := locateReply(t, out, replyTo("r1")); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
		t.Fatalf("n1 once the creator's copy is whole: %v", r)
	}

	tb = NewLocationTable(TableConfig{})
	create(t, tb, "y", 1<<20, 0)
	locate(tb, "y", 1, t0)
	locate(tb, "y", 2, t0)
	relocate(tb, "y", 1, 0, false, t0)
	tb.onNodeFailed("n2")
	out = tb.onNodeFailed("n0").Sends // the creator dies: nothing can finish y
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("n1 after the creator's failure: %v, want LOST", r)
	}
}
