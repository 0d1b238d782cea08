package bench

import (
	"testing"
	"time"
)

// A timed call's reply waits as long again as the call took, at least
// minReplyHold and at most maxReplyHold.
func TestReplyAtHoldsAsLongAsTheGetTook(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		took, hold time.Duration
	}{
		{0, minReplyHold},
		{100 * time.Microsecond, minReplyHold},
		{1300 * time.Microsecond, minReplyHold},
		{30 * time.Millisecond, 30 * time.Millisecond},
		{700 * time.Millisecond, 700 * time.Millisecond},
		{5 * time.Second, maxReplyHold},
		{-time.Millisecond, minReplyHold}, // a clock step back
	} {
		if got := replyAt(t0, t0.Add(c.took)).Sub(t0.Add(c.took)); got != c.hold {
			t.Errorf("a Get of %v: reply held %v, want %v", c.took, got, c.hold)
		}
	}
}
