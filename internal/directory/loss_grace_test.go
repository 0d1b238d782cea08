package directory

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// A doubt's grace scales with the members' measured round trip: a
// FetchDone that crossed its sender's failure takes longer on a loaded
// machine or a slow network, and a fixed second, tuned on an idle one,
// gave up on it. The configured LossGrace stays the floor.
func TestLossGraceScalesWithTheMeasuredRoundTrip(t *testing.T) {
	if g := LossGraceFor(time.Second, 100*time.Microsecond); g != time.Second {
		t.Fatalf("grace for a loopback round trip: %v, want the 1 s floor", g)
	}
	if g := LossGraceFor(time.Second, 40*time.Millisecond); g != LossGraceRoundTrips*40*time.Millisecond {
		t.Fatalf("grace for a 40 ms round trip: %v, want %d of them", g, LossGraceRoundTrips)
	}

	const floor = 100 * time.Millisecond
	doubt := func(grace time.Duration) *LocationTable {
		t.Helper()
		tb := NewLocationTable(TableConfig{LossGrace: floor})
		tb.SetLossGrace(grace)
		createComplete(t, tb, "y", 1<<20, 0)
		locate(tb, "y", 1, t0) // n1 <- n0
		noLoss(t, "n0 fails", tb.onNodeFailed("n0").Sends)
		locate(tb, "y", 2, t0) // parks: n1's copy has no live upstream
		noLoss(t, "the grace starts", tb.onTick(t0).Sends)
		return tb
	}
	tb := doubt(4 * floor)
	noLoss(t, "past the floor, within the measured grace", tb.onTick(t0.Add(2*floor)).Sends)
	out := tb.onTick(t0.Add(4 * floor)).Sends
	if r := locateReply(t, out, replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("the waiting Get once the measured grace passed: %v, want LOST", r)
	}

	// A measure below the floor does not shorten it.
	tb = doubt(floor / 10)
	noLoss(t, "within the floor", tb.onTick(t0.Add(floor-1)).Sends)
	if r := locateReply(t, tb.onTick(t0.Add(floor)).Sends, replyTo("r2")); !errors.Is(r.GetError(), messages.ErrLost) {
		t.Fatalf("the waiting Get once the floor passed: %v, want LOST", r)
	}
}
