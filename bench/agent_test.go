package bench

import (
	"testing"
	"time"
)

// A timed Get's reply waits as long again as the Get took, at most
// maxReplyHold.
func TestReplyAtHoldsAsLongAsTheGetTook(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		took, hold time.Duration
	}{
		{0, 0},
		{1300 * time.Microsecond, 1300 * time.Microsecond},
		{700 * time.Millisecond, 700 * time.Millisecond},
		{5 * time.Second, maxReplyHold},
		{-time.Millisecond, 0}, // a clock step back holds nothing
	} {
		if got := replyAt(t0, t0.Add(c.took)).Sub(t0.Add(c.took)); got != c.hold {
			t.Errorf("a Get of %v: reply held %v, want %v", c.took, got, c.hold)
		}
	}
}
