package clock

import (
	"context"
	"time"
)

// Wait waits for at with a Go timer, or returns earlier with ctx's
// error. On a process with nothing else to run it may wake up to a
// millisecond late (see SleepUntil); it costs no file descriptor or
// system call of its own.
func Wait(ctx context.Context, at time.Time) error {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
