// Package lag measures how late this process's goroutines get to run,
// so that the timeouts inside Hoplite stretch on a busy machine instead
// of firing on work that is merely slow.
//
// A fixed timeout tuned on an idle machine mistakes a saturated CPU for
// a failure: a fetch's stall timeout switches senders that were only
// descheduled, a health check suspects a live member, a rebuilt shard
// stops waiting for store nodes that were about to republish. Each costs
// time, and re-asks add load where load was the cause. A Meter samples
// how late a short periodic sleep wakes up (the scheduling delay every
// goroutine of the process sees, from other processes on the CPUs and
// from the process's own backlog) and Stretch adds a multiple of its
// recent peak to a timeout.
package lag

import (
	"math"
	"sync"
	"time"
)

// Period is how often a Meter samples while the process runs on time.
// Every sample wakes the process: at BusyPeriod the Meters of an idle
// 16-member cluster woke it 800 times a second, for nothing.
const Period = 100 * time.Millisecond

// BusyPeriod is how often a Meter samples once it has seen a delay of
// BusyLag or more, until the peak decays below it again. A sample sees
// only its own wake-up: at Period, a machine that stalls its goroutines
// in bursts shorter than the period is mostly missed, and the timeouts
// it should have stretched fire on work that was merely slow (failure
// tests that passed on an idle machine timed out on a loaded CI runner).
const BusyPeriod = 20 * time.Millisecond

// BusyLag is the delay from which a Meter samples every BusyPeriod: far
// above a timer's own slack (1 ms in hoplite node) and an idle machine's
// wake-up, well below any timeout it stretches.
const BusyLag = 2 * time.Millisecond

// HalfLife is how fast a peak is forgotten: a machine that was busy a
// few seconds ago may be busy again, but one idle for a minute is idle.
const HalfLife = 5 * time.Second

// Factor is how many recent peak delays Stretch adds to a timeout. A
// timeout waits for a chain of a few messages, each of which may meet
// the delay on both ends.
const Factor = 8

// MaxStretch bounds what Stretch adds, so that a process stopped for
// long (SIGSTOP, a suspended VM) does not stretch its timeouts past use.
const MaxStretch = 30 * time.Second

// Meter is one process's (or one member's) measure of its scheduling
// delay. A nil *Meter measures nothing and stretches nothing.
type Meter struct {
	mu      sync.Mutex
	peak    time.Duration // the decayed peak delay, as of at
	at      time.Time
	samples int64

	stop chan struct{}
	done chan struct{}
}

// Start starts a Meter; Stop ends its goroutine.
func Start() *Meter {
	m := &Meter{stop: make(chan struct{}), done: make(chan struct{}), at: time.Now()}
	go m.run()
	return m
}

func (m *Meter) run() {
	defer close(m.done)
	t := time.NewTimer(Period)
	defer t.Stop()
	want := time.Now().Add(Period)
	for {
		select {
		case <-m.stop:
			return
		case now := <-t.C:
			next := nextPeriod(m.observe(now.Sub(want), now))
			want = time.Now().Add(next)
			t.Reset(next)
		}
	}
}

// nextPeriod is the wait before the next sample once the decayed peak
// is peak.
func nextPeriod(peak time.Duration) time.Duration {
	if peak >= BusyLag {
		return BusyPeriod
	}
	return Period
}

// observe records one sample of delay d taken at now and returns the
// peak.
func (m *Meter) observe(d time.Duration, now time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := decay(m.peak, now.Sub(m.at))
	m.peak, m.at = max(cur, d), now
	m.samples++
	return m.peak
}

// decay is peak after elapsed has passed.
func decay(peak, elapsed time.Duration) time.Duration {
	if elapsed <= 0 || peak <= 0 {
		return max(peak, 0)
	}
	return time.Duration(float64(peak) * math.Exp2(-float64(elapsed)/float64(HalfLife)))
}

// Lag is the recent peak scheduling delay (0 for a nil Meter).
func (m *Meter) Lag() time.Duration {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return decay(m.peak, time.Since(m.at))
}

// Stretch is timeout d lengthened by the recent scheduling delay: d on
// an idle machine, up to d + MaxStretch on a stalled one.
func (m *Meter) Stretch(d time.Duration) time.Duration {
	return d + min(Factor*m.Lag(), MaxStretch)
}

// Stop ends the Meter's sampling; it is safe to call more than once
// and on a nil Meter. Lag keeps answering with the last peak, decaying.
func (m *Meter) Stop() {
	if m == nil {
		return
	}
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
}

// shared is the process's Meter, started by its first user and stopped
// by its last: the members of one process share its CPUs, so one sampler
// serves them all.
var shared struct {
	mu   sync.Mutex
	m    *Meter
	refs int
}

// Shared returns the process's Meter and the func that releases it; the
// sampler stops when the last user releases it.
func Shared() (*Meter, func()) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.refs == 0 {
		shared.m = Start()
	}
	shared.refs++
	m := shared.m
	var once sync.Once
	return m, func() {
		once.Do(func() {
			shared.mu.Lock()
			defer shared.mu.Unlock()
			if shared.refs--; shared.refs == 0 {
				shared.m.Stop()
				shared.m = nil
			}
		})
	}
}
