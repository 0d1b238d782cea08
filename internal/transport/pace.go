package transport

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/clock"
)

// EgressPacer shares one sending rate among the streams that ask for
// pacing (OpenPaced), chunk by chunk in the order they ask: a stream
// reserves the next free slot on one clock for each chunk, so the active
// streams take turns, and a stream that has nothing to send holds no slot
// (the rate goes to the others; idle time earns no credit).
//
// Why: a sliced AllReduce sends 2(n−1) streams out of every node at once.
// Left to TCP, on a link with a deep queue (a shaped 400 Mbit/s testbed
// host queues 200 ms), some streams take most of the link and others
// starve, and every chain is as slow as its slowest hop: eight hosts'
// slices finished between 0.88 and 1.84 s. Sent in turn at just under
// the link's rate, no queue builds and the streams finish together. The
// rate must be the link's: paced at 46, 47, 47.6 and 48.5 MB/s over links
// that carry 47.8, the same AllReduce took 1.38, 1.31, 1.33 and 1.40 s;
// in-band measurements of B missed by more (53 and 35 MB/s), which is why
// the rate is the member's declared link rate (cluster.MemberConfig.LinkRate).
type EgressPacer struct {
	rate func() float64 // bytes per second; nil or <= 0: unpaced

	mu   sync.Mutex
	next time.Time // the end of the last reserved slot

	bytes atomic.Int64
}

// NewEgressPacer paces at rate() bytes per second, read at every chunk;
// rate() <= 0 (or a nil rate) sends unpaced.
func NewEgressPacer(rate func() float64) *EgressPacer {
	return &EgressPacer{rate: rate}
}

// Bytes is how many bytes were sent through the pacer (also while
// unpaced).
func (p *EgressPacer) Bytes() int64 { return p.bytes.Load() }

// sent counts n bytes sent after their wait.
func (p *EgressPacer) sent(n int) { p.bytes.Add(int64(n)) }

// wait returns when n more bytes may be sent, or with ctx's error. A wait
// that ends with ctx keeps its slot: the clock never runs backwards.
func (p *EgressPacer) wait(ctx context.Context, n int) error {
	var rate float64
	if p.rate != nil {
		rate = p.rate()
	}
	if !(rate > 0) {
		return nil
	}
	p.mu.Lock()
	start := reserve(&p.next, time.Now(), n, rate)
	p.mu.Unlock()
	if time.Until(start) <= 0 {
		return nil
	}
	return clock.Wait(ctx, start)
}

// reserve books n bytes at rate on the clock whose last slot ends at
// *next, no earlier than now, and returns the slot's start. A clock that
// fell behind now restarts at now: time nobody used is not owed to
// anybody.
func reserve(next *time.Time, now time.Time, n int, rate float64) time.Time {
	start := *next
	if start.Before(now) {
		start = now
	}
	*next = start.Add(time.Duration(float64(n) / rate * float64(time.Second)))
	return start
}
