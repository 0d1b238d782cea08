package sim

import (
	"math"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// The barrier of N hosts on its combining tree: every host released
// once, in at most 2·⌈log2 N⌉ rounds of messages (an arrival's hops up
// and its outcome's down), at 1,024 within twice the ideal, and faster
// than one manager taking every arrival itself, in the same run.
func TestBarrierTakesLogarithmicRounds(t *testing.T) {
	for _, n := range []int{8, 64, 256, 1024} {
		for seed := uint64(1); seed <= 5; seed++ {
			c := cfg("barrier", n, 0, seed)
			o := run(t, c)
			lg := int(math.Ceil(math.Log2(float64(n))))
			if o.Depth < 2 || o.Depth > 2*lg {
				t.Errorf("N=%d seed %d: %d rounds, want 2..%d", n, seed, o.Depth, 2*lg)
			}
			ideal := Ideal("barrier", n, 0, c.Params)
			if n == 1024 && o.Time > 2*ideal {
				t.Errorf("N=%d seed %d: %v, more than twice the ideal %v", n, seed, o.Time, ideal)
			}
			f, err := flatBarrier(c)
			if err != nil {
				t.Fatal(err)
			}
			if len(f.Violations) > 0 {
				t.Fatalf("flat baseline: %v", f.Violations)
			}
			if n >= 64 && o.Time >= f.Time {
				t.Errorf("N=%d seed %d: tree %v, one manager %v", n, seed, o.Time, f.Time)
			}
			if seed == 1 {
				t.Logf("N=%4d: tree %v (%d rounds, %d messages), one manager %v (%d messages), ideal %v: %.2f× ideal",
					n, o.Time, o.Depth, o.Messages, f.Time, f.Messages, ideal, float64(o.Time)/float64(ideal))
			}
		}
	}
}

// Partial barriers on the simulated tree: participants enter spread
// over time, and each barrier fires early by its rule, releases late
// arrivals or throttles its release, every host released once within
// the tree's rounds.
func TestPartialBarriersOnTheSimulatedTree(t *testing.T) {
	const n = 256
	spread := func(i int) time.Duration { return time.Duration(i) * 200 * time.Microsecond }
	for _, c := range []struct {
		name string
		o    policy.Options
	}{
		{"timeout", policy.Options{MaxParticipants: n, Timeout: 20 * time.Millisecond}},
		{"percent", policy.Options{MaxParticipants: n, MinPercent: 50, MinWait: 5 * time.Millisecond}},
		{"knee", policy.Options{MaxParticipants: n, FireOnKnee: true, MinPercent: 50}},
		{"throttle", policy.Options{MaxParticipants: n, Throttle: &policy.Throttle{Count: 32, Interval: time.Millisecond}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 3; seed++ {
				cf := cfg("barrier", n, 0, seed)
				o, err := runBarrier(cf, barrierSpec{opts: c.o, fanout: BarrierFanout, enter: spread})
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range o.Violations {
					t.Error(v)
				}
				if lg := int(math.Ceil(math.Log2(n))); o.Depth > 2*lg {
					t.Errorf("seed %d: %d rounds, more than %d", seed, o.Depth, 2*lg)
				}
				if seed == 1 {
					t.Logf("%s: last release at %v, %d rounds, %d messages", c.name, o.Time, o.Depth, o.Messages)
				}
			}
		})
	}
}

// Every fan-out from a binary tree to 16 releases all 1,024 hosts
// within its rounds (the times are logged side by side).
func TestBarrierFanouts(t *testing.T) {
	for _, k := range []int{2, 3, 4, 8, 16} {
		c := cfg("barrier", 1024, 0, 1)
		o, err := runBarrier(c, barrierSpec{opts: policy.Options{MaxParticipants: 1024}, fanout: k})
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Violations) > 0 {
			t.Fatal(o.Violations)
		}
		if o.Depth > 2*10 {
			t.Errorf("fan-out %d: %d rounds, more than 20", k, o.Depth)
		}
		t.Logf("fan-out %2d: %v, %d rounds", k, o.Time, o.Depth)
	}
}
