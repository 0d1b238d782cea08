//go:build !linux

package clock

import "time"

// SleepUntil sleeps until at with the Go timer.
func SleepUntil(at time.Time) { time.Sleep(time.Until(at)) }
