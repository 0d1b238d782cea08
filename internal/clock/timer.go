package clock

import (
	"context"
	"time"
)

// timerSleep waits for at with a Go timer, or for ctx.
func timerSleep(ctx context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
