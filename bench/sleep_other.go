//go:build !linux

package bench

import "time"

// preciseSleep sleeps until at with the Go timer (the testbed, whose
// start skew it is meant for, is Linux only).
func preciseSleep(at time.Time) { time.Sleep(time.Until(at)) }
