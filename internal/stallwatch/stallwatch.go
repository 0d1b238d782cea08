// Package stallwatch records when this process did not run: a goroutine
// asks for short sleeps, and a wake-up far later than asked is a gap in
// which none of the process's goroutines could be relied on to run.
//
// A chaos oracle needs it to tell its own lateness from the system's: a
// machine that stops every process (CPU starvation beside other loads,
// memory reclaim, a stopped VM) delays the recorder's reading of an
// answer as much as the answer, and the history would count that delay
// as the system's.
package stallwatch

import (
	"context"
	"sync"
	"time"
)

// Tick is how long the watch sleeps between looks; a wake-up later than
// Late past its tick is a gap.
const (
	Tick = 50 * time.Millisecond
	Late = 4 * Tick
)

// maxGaps bounds what a watch keeps: the oldest gaps go first, and a
// soak's checks look back seconds, not hours.
const maxGaps = 4096

// Watch is the gaps one watch saw. Safe for concurrent use.
type Watch struct {
	mu      sync.Mutex
	gaps    [][2]time.Time
	longest time.Duration
	total   time.Duration
	count   int
}

// Start watches until ctx ends.
func Start(ctx context.Context) *Watch {
	w := &Watch{}
	// last is read before the goroutine starts: a stop that lands before
	// the goroutine first runs must still count from here.
	last := time.Now()
	go func() {
		t := time.NewTimer(Tick)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := time.Now()
			if now.Sub(last) > Tick+Late {
				w.Add(last.Add(Tick), now)
			}
			last = now
			t.Reset(Tick)
		}
	}()
	return w
}

// Add records that the process did not run from from to to.
func (w *Watch) Add(from, to time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.gaps) == maxGaps {
		w.gaps = append(w.gaps[:0], w.gaps[1:]...)
	}
	w.gaps = append(w.gaps, [2]time.Time{from, to})
	d := to.Sub(from)
	w.longest = max(w.longest, d)
	w.total += d
	w.count++
}

// Within is how long the process did not run between from and to (0 for
// a nil watch).
func (w *Watch) Within(from, to time.Time) time.Duration {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var d time.Duration
	for _, g := range w.gaps {
		a, b := g[0], g[1]
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

// Summary is what a watch saw in all: how many gaps, their total and the
// longest.
type Summary struct {
	Gaps           int
	Total, Longest time.Duration
}

// Summary says what the watch saw since it started.
func (w *Watch) Summary() Summary {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Summary{Gaps: w.count, Total: w.total, Longest: w.longest}
}
