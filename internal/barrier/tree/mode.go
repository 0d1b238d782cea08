package tree

import (
	"fmt"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// Mode says when a position forwards its subtree's arrivals.
type Mode int

const (
	// Hold forwards a subtree's arrivals in one message once every
	// arrival the position expects is in, and each later one at once;
	// until then, what it holds goes up Config.Linger after the first
	// of it.
	Hold Mode = iota
	// AtOnce forwards on every step what reached the position in it.
	AtOnce
)

func (m Mode) String() string {
	switch m {
	case Hold:
		return "hold"
	case AtOnce:
		return "at-once"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ModeFor is the mode a barrier of options o allows: Hold only when it
// fires on its last entry and on nothing else. Every early-entry rule
// (Timeout, MinPercent, FireOnKnee, an entry callback) decides on the
// arrivals as they come, so holding them back would change when it
// fires and which labels arrive late; a throttled release and a
// semaphore serve labels in the order they arrived.
func ModeFor(o policy.Options) Mode {
	if o.Timeout > 0 || o.MinPercent > 0 || o.MinWait > 0 || o.FireOnKnee || o.EntryCallback ||
		o.Throttle != nil || o.Semaphore != nil {
		return AtOnce
	}
	return Hold
}
