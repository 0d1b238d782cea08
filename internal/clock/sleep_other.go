//go:build !linux

package clock

import (
	"context"
	"time"
)

// SleepUntil sleeps until at with the Go timer, or returns earlier with
// ctx's error.
func SleepUntil(ctx context.Context, at time.Time) error { return Wait(ctx, at) }
