package bench

import (
	"context"
	"errors"
	"testing"
	"time"
)

// sleepUntil never returns before the time it was given, whether the
// time is within a Go timer's millisecond of rounding or past it, and
// returns at once with ctx's error when ctx ends first.
func TestSleepUntil(t *testing.T) {
	for _, ahead := range []time.Duration{-time.Millisecond, 0, 300 * time.Microsecond, time.Millisecond, 6 * time.Millisecond} {
		at := time.Now().Add(ahead)
		if err := sleepUntil(context.Background(), at); err != nil {
			t.Fatalf("%v ahead: %v", ahead, err)
		}
		if now := time.Now(); now.Before(at) {
			t.Errorf("%v ahead: returned %v before the time", ahead, at.Sub(now))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	// A wait that ignored ctx would sleep the hour: the test binary's
	// timeout, not a time assertion, catches that.
	if err := sleepUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	if err := sleepUntil(context.Background(), time.Time{}); err != nil {
		t.Fatalf("the zero time: %v", err)
	}
}
