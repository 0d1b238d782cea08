package lag

import (
	"testing"
	"time"
)

// A delay observed raises the peak at once, and the peak halves every
// HalfLife after; a smaller delay meanwhile does not lower it.
func TestPeakDecays(t *testing.T) {
	m := &Meter{}
	t0 := time.Unix(1000, 0)
	m.at = t0
	m.observe(400*time.Millisecond, t0)
	m.observe(10*time.Millisecond, t0.Add(HalfLife))
	m.mu.Lock()
	got := m.peak
	m.mu.Unlock()
	if got != 200*time.Millisecond {
		t.Fatalf("peak one half-life after 400 ms with a 10 ms sample: %v, want 200ms", got)
	}
	m.observe(300*time.Millisecond, t0.Add(HalfLife))
	m.mu.Lock()
	got = m.peak
	m.mu.Unlock()
	if got != 300*time.Millisecond {
		t.Fatalf("a larger sample: peak %v, want 300ms", got)
	}
}

// Stretch adds Factor times the delay, bounded by MaxStretch; a nil
// Meter stretches nothing.
func TestStretch(t *testing.T) {
	var none *Meter
	if got := none.Stretch(time.Second); got != time.Second {
		t.Fatalf("nil meter: %v", got)
	}
	none.Stop()
	m := &Meter{peak: 100 * time.Millisecond, at: time.Now().Add(time.Hour)} // not decayed yet
	if got := m.Stretch(time.Second); got != time.Second+Factor*100*time.Millisecond {
		t.Fatalf("stretch of 1 s with a 100 ms delay: %v", got)
	}
	m.peak = time.Hour
	if got := m.Stretch(time.Second); got != time.Second+MaxStretch {
		t.Fatalf("stretch with an hour's delay: %v, want bounded at %v", got, time.Second+MaxStretch)
	}
}

// A running Meter samples, and Stop ends it (twice is fine).
func TestStartStop(t *testing.T) {
	m := Start()
	deadline := time.Now().Add(5 * time.Second)
	for {
		m.mu.Lock()
		n := m.samples
		m.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the meter never sampled")
		}
		time.Sleep(Period)
	}
	m.Stop()
	m.Stop()
	select {
	case <-m.done:
	default:
		t.Fatal("Stop returned with the sampler running")
	}
}

// Users of the shared Meter get the same one; it stops with the last
// release, and a release twice counts once.
func TestShared(t *testing.T) {
	a, releaseA := Shared()
	b, releaseB := Shared()
	if a != b {
		t.Fatal("two users got two meters")
	}
	releaseA()
	releaseA()
	select {
	case <-a.done:
		t.Fatal("the meter stopped while a user held it")
	default:
	}
	releaseB()
	select {
	case <-a.done:
	default:
		t.Fatal("the meter runs after its last release")
	}
	c, releaseC := Shared()
	defer releaseC()
	if c == a {
		t.Fatal("a stopped meter was handed out again")
	}
}

// A Meter samples every Period while its peak stays under BusyLag, and
// every BusyPeriod from the sample that sees a delay of BusyLag until
// the peak has decayed below it again.
func TestSamplesFasterWhileBusy(t *testing.T) {
	m := &Meter{}
	t0 := time.Now()
	m.at = t0
	if got := nextPeriod(m.observe(100*time.Microsecond, t0)); got != Period {
		t.Fatalf("after a 100 µs delay: next sample in %v, want %v", got, Period)
	}
	if got := nextPeriod(m.observe(5*time.Millisecond, t0.Add(Period))); got != BusyPeriod {
		t.Fatalf("after a 5 ms delay: next sample in %v, want %v", got, BusyPeriod)
	}
	// Idle samples after it: the 5 ms peak halves every HalfLife and keeps
	// the fast pace until it is under BusyLag (after two half-lives: 1.25 ms).
	if got := nextPeriod(m.observe(0, t0.Add(Period+HalfLife))); got != BusyPeriod {
		t.Fatalf("one half-life after a 5 ms delay (peak 2.5 ms): next sample in %v, want %v", got, BusyPeriod)
	}
	if got := nextPeriod(m.observe(0, t0.Add(Period+2*HalfLife))); got != Period {
		t.Fatalf("two half-lives after a 5 ms delay (peak 1.25 ms): next sample in %v, want %v", got, Period)
	}
}
