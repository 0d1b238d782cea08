//go:build !linux

package timerslack

import (
	"errors"
	"time"
)

// Current is not known off Linux.
func Current() (time.Duration, error) {
	return 0, errors.New("timer slack: only on Linux")
}

// Ensure does nothing off Linux: there is no timer slack to set.
func Ensure(time.Duration) error { return nil }
