package clock

import (
	"testing"
	"time"
)

// SleepUntil never returns before its time, for times past, at hand and
// ahead.
func TestSleepUntil(t *testing.T) {
	for _, ahead := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(ahead)
		SleepUntil(at)
		if now := time.Now(); now.Before(at) {
			t.Errorf("%v ahead: returned %v early", ahead, at.Sub(now))
		}
	}
}
