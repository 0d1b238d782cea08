package policy

import (
	"slices"
	"time"
)

const (
	// AdaptiveMinWindow is the smallest window of recent holding times the
	// adaptive controller compares with the whole history.
	AdaptiveMinWindow = 3
	// AdaptiveMaxHistory bounds the holding times kept; the oldest are
	// dropped beyond it.
	AdaptiveMaxHistory = 1 << 16
)

// Adaptive is the adaptive concurrency controller of semaphore barriers
// (the paper's section 4, after SEDA's thread-pool controller).
//
// Each time a holder leaves the critical section its holding time (from
// admission to release) is observed. The controller then compares the
// median of the recent holding times with the median of all of them:
//
//   - recent median more than 50% above the overall median: release no one
//     (concurrency shrinks by one);
//   - more than 10% and at most 50% above: release one (concurrency kept);
//   - otherwise: release two (concurrency grows by one).
//
// Window: the recent window is the current concurrency level, as in the
// paper's example (15 hosts in the critical section when the 45th is
// released: the last 15 releases against all 45), bounded on two sides. It
// is at most half of the samples recorded: a level that grows by one per
// release is always larger than the number of releases so far, so an
// unbounded window would always span the whole history, recent and overall
// would be the same set, and no slowdown would ever be seen. And it is at
// least AdaptiveMinWindow (3), so that at a level of one or two a single
// slow holder does not decide alone. With 3 or fewer samples recent and
// overall are the same set and the controller grows.
type Adaptive struct {
	samples []time.Duration
}

// Observe records one holding time.
func (a *Adaptive) Observe(hold time.Duration) {
	if len(a.samples) == AdaptiveMaxHistory {
		copy(a.samples, a.samples[1:])
		a.samples = a.samples[:len(a.samples)-1]
	}
	a.samples = append(a.samples, hold)
}

// Samples is the number of holding times recorded.
func (a *Adaptive) Samples() int { return len(a.samples) }

// Window is the recent window used at a concurrency level.
func (a *Adaptive) Window(level int) int {
	w := min(level, len(a.samples)/2)
	if w < AdaptiveMinWindow {
		w = AdaptiveMinWindow
	}
	if w > len(a.samples) {
		w = len(a.samples)
	}
	return w
}

// Decide returns how many hosts to release (0, 1 or 2) after a release at
// the given concurrency level.
func (a *Adaptive) Decide(level int) int {
	if len(a.samples) == 0 {
		return 2
	}
	w := a.Window(level)
	return AdaptiveRelease(a.samples[len(a.samples)-w:], a.samples)
}

// AdaptiveRelease is the paper's rule on explicit sets: the number of
// hosts to release (0, 1 or 2) given the recent and all holding times.
func AdaptiveRelease(recent, all []time.Duration) int {
	if len(recent) == 0 || len(all) == 0 {
		return 2
	}
	r, o := median(recent), median(all)
	switch {
	case r > 1.5*o:
		return 0
	case r > 1.1*o:
		return 1
	default:
		return 2
	}
}

// median of a set of durations, as float64 nanoseconds (the mean of the two
// middle values for an even count). The input is not modified.
func median(xs []time.Duration) float64 {
	s := append([]time.Duration(nil), xs...)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return float64(s[m])
	}
	return (float64(s[m-1]) + float64(s[m])) / 2
}
