package policy

import (
	"testing"
	"time"
)

func durs(ss ...float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

func TestMedian(t *testing.T) {
	cases := []struct {
		in   []time.Duration
		want float64
	}{
		{durs(3), 3e9},
		{durs(3, 1, 2), 2e9},
		{durs(4, 1, 3, 2), 2.5e9},
		{durs(5, 5, 1, 1, 1), 1e9},
	}
	for _, c := range cases {
		in := append([]time.Duration(nil), c.in...)
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
		for i := range in {
			if in[i] != c.in[i] {
				t.Fatalf("median modified its input")
			}
		}
	}
}

func TestAdaptiveReleaseThresholds(t *testing.T) {
	all := durs(10, 10, 10, 10, 10) // overall median 10 s (recent is separate here)
	cases := []struct {
		recent float64
		want   int
	}{
		{5, 2}, {10, 2}, {11, 2}, // at most 10% worse: grow
		{11.01, 1}, {13, 1}, {15, 1}, // more than 10%, at most 50%: keep
		{15.01, 0}, {30, 0}, // more than 50% worse: shrink
	}
	for _, c := range cases {
		if got := AdaptiveRelease(durs(c.recent), all); got != c.want {
			t.Errorf("recent %vs vs overall 10s: release %d, want %d", c.recent, got, c.want)
		}
	}
	if got := AdaptiveRelease(nil, all); got != 2 {
		t.Errorf("no recent samples: %d, want 2", got)
	}
}

// TestAdaptiveWindow: the paper's example, 15 in the section when the 45th
// is released: the last 15 against all 45.
func TestAdaptiveWindow(t *testing.T) {
	var a Adaptive
	if a.Decide(15) != 2 {
		t.Fatal("empty controller must grow")
	}
	for i := 0; i < 30; i++ {
		a.Observe(time.Second)
	}
	for i := 0; i < 15; i++ {
		a.Observe(2 * time.Second)
	}
	if a.Samples() != 45 || a.Window(15) != 15 {
		t.Fatalf("samples %d window %d", a.Samples(), a.Window(15))
	}
	// last 15: median 2 s; all 45: median 1 s: 100% worse.
	if got := a.Decide(15); got != 0 {
		t.Fatalf("Decide(15) = %d, want 0", got)
	}
	// The window is at least AdaptiveMinWindow and at most half the samples.
	if a.Window(1) != AdaptiveMinWindow || a.Window(1000) != 22 || a.Window(20) != 20 {
		t.Fatalf("Window(1)=%d Window(1000)=%d Window(20)=%d", a.Window(1), a.Window(1000), a.Window(20))
	}
	// Window 22: the last 22 are 15 slow and 7 fast, median 2 s.
	if got := a.Decide(1000); got != 0 {
		t.Fatalf("Decide(1000) = %d, want 0", got)
	}
	var small Adaptive
	for _, d := range durs(1, 1, 9) { // 3 samples: recent is all of them
		small.Observe(d)
	}
	if small.Window(10) != 3 || small.Decide(10) != 2 {
		t.Fatalf("small: window %d decide %d", small.Window(10), small.Decide(10))
	}
}

// TestAdaptiveDirection: worse recent holding times release fewer hosts.
func TestAdaptiveDirection(t *testing.T) {
	run := func(recent float64) int {
		var a Adaptive
		for i := 0; i < 40; i++ {
			a.Observe(time.Second)
		}
		for i := 0; i < 5; i++ {
			a.Observe(time.Duration(recent * float64(time.Second)))
		}
		return a.Decide(5)
	}
	prev := 3
	for _, r := range []float64{0.5, 1, 1.05, 1.2, 1.4, 1.6, 3, 10} {
		got := run(r)
		if got > prev {
			t.Fatalf("recent %vx: released %d, more than %d for a better recent", r, got, prev)
		}
		prev = got
	}
	if run(1) != 2 || run(1.3) != 1 || run(2) != 0 {
		t.Fatalf("run(1)=%d run(1.3)=%d run(2)=%d, want 2 1 0", run(1), run(1.3), run(2))
	}
}

func TestAdaptiveHistoryBounded(t *testing.T) {
	var a Adaptive
	for i := 0; i < AdaptiveMaxHistory+10; i++ {
		a.Observe(time.Duration(i))
	}
	if a.Samples() != AdaptiveMaxHistory || a.samples[0] != 10 {
		t.Fatalf("samples %d, oldest %v", a.Samples(), a.samples[0])
	}
}

// TestAdaptiveSemaphoreDirection drives an adaptive semaphore barrier whose
// holders take 1 s for the first 40 releases and 4 s afterwards: the level
// grows by one per release while holding times are steady, then shrinks
// once the recent median is more than 50% above the overall one (the
// window being at most half the history, the first slow releases are
// still outvoted, so the peak is somewhat above 42).
func TestAdaptiveSemaphoreDirection(t *testing.T) {
	const n = 200
	b := mustBarrier(t, Options{MaxParticipants: n, Semaphore: &Semaphore{Count: 2, Adaptive: true}})
	for i := 0; i < n; i++ {
		mustEnter(t, b, t0, label(i))
	}
	heldSince := map[string]time.Time{}
	for _, l := range b.Holders() {
		heldSince[l] = t0
	}
	now := t0
	peak, shrank := 0, false
	for i := 0; len(b.Holders()) > 0; i++ {
		hold := time.Second
		if i >= 40 {
			hold = 4 * time.Second
		}
		l := b.Holders()[0]
		if at := heldSince[l].Add(hold); at.After(now) {
			now = at
		}
		before := b.Limit()
		d, err := b.Release(now, l)
		if err != nil {
			t.Fatal(err)
		}
		checkNext(t, b, d)
		for _, a := range d.Release {
			heldSince[a] = now
		}
		if len(d.Release) > 2 {
			t.Fatalf("release %d admitted %d", i, len(d.Release))
		}
		switch {
		case i < 40 && len(b.Waiting()) > 0:
			if b.Limit() != before+1 || len(d.Release) != 2 {
				t.Fatalf("steady release %d: level %d -> %d, admitted %d", i, before, b.Limit(), len(d.Release))
			}
		case i >= 40 && b.Limit() < before:
			shrank = true
			if len(d.Release) != 0 {
				t.Fatalf("level shrank but %d admitted", len(d.Release))
			}
		}
		if i >= 40 && !shrank && i > 40+2*peak {
			t.Fatalf("level did not shrink within %d slow releases", i-40)
		}
		if !shrank {
			peak = max(peak, b.Limit())
		}
	}
	// Once the slow holding times dominate the whole history the controller
	// grows again (the paper's oscillation); only the first peak is checked.
	if !shrank || peak <= 42 || peak >= 70 {
		t.Fatalf("shrank=%v peak=%d", shrank, peak)
	}
	if len(b.Passed()) != n {
		t.Fatalf("%d passed, want %d", len(b.Passed()), n)
	}
}
