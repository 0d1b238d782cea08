package directory

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// ticks are the Tick timers of a step's Box.
func ticks(t *testing.T, b outbox.Box) []time.Time {
	t.Helper()
	var at []time.Time
	for _, tm := range b.Timers {
		tk, ok := tm.Msg.(Tick)
		if !ok || !tk.At.Equal(tm.At) {
			t.Fatalf("timer %+v: want a Tick for its own time", tm)
		}
		at = append(at, tm.At)
	}
	return at
}

// The table's deadlines come as Tick timers in Step's Box: one when a
// parked request's deadline is earlier than the Tick pending, none when
// it is later; the Tick answers what is due, a stale Tick leaves the
// pending one in place, and the next deadline is armed again.
func TestStepArmsTheTableTickInTheBox(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	now := time.Unix(1000, 0)
	park := func(id string, timeout time.Duration, to string) outbox.Box {
		return tb.Step(now, Locate{Req: &messages.Locate{ObjectId: id, Receiver: node(1), TimeoutMs: timeout.Milliseconds()}, ReplyTo: replyTo(to)})
	}
	first := park("a", 2*time.Second, "ra")
	if at := ticks(t, first); len(at) != 1 || !at[0].Equal(now.Add(2*time.Second)) {
		t.Fatalf("parking a Locate of 2s armed %v", at)
	}
	if at := ticks(t, park("b", 5*time.Second, "rb")); len(at) != 0 {
		t.Fatalf("a later deadline armed %v; the pending Tick comes first", at)
	}
	if at := ticks(t, park("c", time.Second, "rc")); len(at) != 1 || !at[0].Equal(now.Add(time.Second)) {
		t.Fatalf("an earlier deadline armed %v", at)
	}
	// The Tick of 2s is stale now: at its time it answers c (due), and
	// the pending Tick stays the one of 1s, so nothing is armed again.
	stale := tb.Step(now.Add(2*time.Second), Tick{At: now.Add(2 * time.Second)})
	if r := locateReply(t, stale.Sends, replyTo("rc")); r.GetError().GetCode() != messages.ErrorCode_TIMEOUT {
		t.Fatalf("c's answer at its deadline: %v", r)
	}
	if len(ticks(t, stale)) != 0 {
		t.Fatalf("a stale Tick armed %v while the Tick of 1s is pending", stale.Timers)
	}
	due := tb.Step(now.Add(3*time.Second), Tick{At: now.Add(time.Second)})
	if at := ticks(t, due); len(at) != 1 || !at[0].Equal(now.Add(5*time.Second)) {
		t.Fatalf("after the pending Tick the table armed %v; want b's deadline", at)
	}
	end := tb.Step(now.Add(5*time.Second), Tick{At: now.Add(5 * time.Second)})
	if r := locateReply(t, end.Sends, replyTo("rb")); r.GetError().GetCode() != messages.ErrorCode_TIMEOUT {
		t.Fatalf("b's answer at its deadline: %v", r)
	}
	if len(end.Timers) != 0 {
		t.Fatalf("nothing parked, yet the table armed %v", end.Timers)
	}
}
