package policy

import (
	"errors"
	"math"
	"math/rand"
	"testing"
	"time"
)

var t0 = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func sec(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func mustKnee(t *testing.T, cfg KneeConfig) *Knee {
	t.Helper()
	k, err := NewKnee(cfg)
	if err != nil {
		t.Fatalf("NewKnee(%+v): %v", cfg, err)
	}
	return k
}

func near(a, b time.Duration) bool { return a-b <= 1 && b-a <= 1 }

// TestKneeFormulas checks the EWMAs by hand: the deviation is taken against
// arr before its update, and samples are arrival times since the first.
func TestKneeFormulas(t *testing.T) {
	k := mustKnee(t, KneeConfig{Warmup: 2})
	k.Arrive(sec(0))
	if a, v := k.Estimate(); a != 0 || v != 0 {
		t.Fatalf("after first: arr=%v arrvar=%v, want 0 0", a, v)
	}
	if !k.NextDeadline().IsZero() {
		t.Fatalf("deadline armed before warm-up: %v", k.NextDeadline())
	}
	k.Arrive(sec(10))
	// arrvar = .75*0 + .25*|10-0| = 2.5; arr = .7*0 + .3*10 = 3
	if a, v := k.Estimate(); !near(a, 3*time.Second) || !near(v, 2500*time.Millisecond) {
		t.Fatalf("after second: arr=%v arrvar=%v, want 3s 2.5s", a, v)
	}
	k.Arrive(sec(20))
	// arrvar = .75*2.5 + .25*|20-3| = 6.125 (with the updated arr it would be
	// .75*2.5 + .25*|20-8.1| = 4.85); arr = .7*3 + .3*20 = 8.1
	a, v := k.Estimate()
	if !near(a, 8100*time.Millisecond) || !near(v, 6125*time.Millisecond) {
		t.Fatalf("after third: arr=%v arrvar=%v, want 8.1s 6.125s", a, v)
	}
	// threshold = 8.1 + 4*6.125 = 32.6 s after the first arrival
	want := sec(32.6)
	if got := k.NextDeadline(); got.Sub(want).Abs() > time.Microsecond {
		t.Fatalf("deadline %v, want %v", got.Sub(t0), want.Sub(t0))
	}
	if !k.Threshold().Equal(k.NextDeadline()) {
		t.Fatalf("Threshold %v != NextDeadline %v", k.Threshold(), k.NextDeadline())
	}
	if k.Arrivals() != 3 {
		t.Fatalf("Arrivals=%d", k.Arrivals())
	}
}

func TestKneeCheckEdgeTriggered(t *testing.T) {
	k := mustKnee(t, KneeConfig{Warmup: 2})
	for _, s := range []float64{0, 10, 12} {
		if k.Arrive(sec(s)) {
			t.Fatalf("knee on arrival at %v", s)
		}
	}
	dl := k.NextDeadline()
	if k.Check(dl.Add(-time.Nanosecond)) {
		t.Fatal("knee before the threshold")
	}
	if len(k.Knees()) != 0 {
		t.Fatalf("knees recorded early: %v", k.Knees())
	}
	if !k.Check(dl) {
		t.Fatal("no knee at the threshold")
	}
	if k.Check(dl.Add(time.Hour)) {
		t.Fatal("same knee reported twice")
	}
	ks := k.Knees()
	if len(ks) != 1 || ks[0].Arrivals != 3 || !ks[0].At.Equal(dl) || !ks[0].Accepted || !ks[0].AcceptedAt.Equal(dl) {
		t.Fatalf("knees %+v", ks)
	}
	if !k.NextDeadline().IsZero() {
		t.Fatalf("deadline after an accepted knee: %v", k.NextDeadline())
	}
	// Detection continues with the next arrival.
	k.Arrive(dl.Add(time.Hour))
	if k.NextDeadline().IsZero() || !k.NextDeadline().After(dl.Add(time.Hour)) {
		t.Fatalf("new threshold %v not after the late arrival", k.NextDeadline())
	}
}

func TestKneeArriveDetectsOverdue(t *testing.T) {
	k := mustKnee(t, KneeConfig{Warmup: 2})
	k.Arrive(sec(0))
	k.Arrive(sec(1))
	dl := k.NextDeadline()
	if !k.Arrive(dl.Add(time.Second)) {
		t.Fatal("an overdue arrival did not report the knee")
	}
	ks := k.Knees()
	if len(ks) != 1 || ks[0].Arrivals != 2 || !ks[0].At.Equal(dl) {
		t.Fatalf("knees %+v", ks)
	}
	if k.Arrivals() != 3 {
		t.Fatalf("Arrivals=%d", k.Arrivals())
	}
}

func TestKneeWarmup(t *testing.T) {
	for _, w := range []int{0, 2, 5, 8} {
		k := mustKnee(t, KneeConfig{Warmup: w})
		want := w
		if w == 0 {
			want = DefaultKneeWarmup
		}
		for i := 0; i < want; i++ {
			if !k.NextDeadline().IsZero() {
				t.Fatalf("warmup %d: deadline armed after %d arrivals", w, i)
			}
			if k.Check(sec(float64(i) + 1e6)) {
				t.Fatalf("warmup %d: knee after %d arrivals", w, i)
			}
			k.Arrive(sec(float64(i)))
		}
		if k.NextDeadline().IsZero() {
			t.Fatalf("warmup %d: deadline not armed after %d arrivals", w, want)
		}
	}
}

func TestKneeTimeNeverGoesBack(t *testing.T) {
	k := mustKnee(t, KneeConfig{Warmup: 2})
	k.Arrive(sec(0))
	k.Arrive(sec(10))
	k.Arrive(sec(5)) // treated as at 10 s
	a, _ := k.Estimate()
	// samples 0, 10, 10: arr = .7*3 + .3*10 = 5.1
	if !near(a, 5100*time.Millisecond) {
		t.Fatalf("arr=%v, want 5.1s", a)
	}
}

// pareto draws a Pareto(xm, alpha) value: heavy-tailed, at least xm.
func pareto(r *rand.Rand, xm, alpha float64) float64 {
	return xm / math.Pow(1-r.Float64(), 1/alpha)
}

// arrivals returns times for n hosts: the first fast ones with exponential
// inter-arrival times of mean 1 s, then a heavy tail of Pareto gaps
// (minimum tailMin seconds, alpha 1.5).
func arrivals(r *rand.Rand, n, fast int, tailMin float64) []time.Time {
	out := []time.Time{t0}
	s := 0.0
	for i := 1; i < n; i++ {
		if i < fast {
			s += r.ExpFloat64()
		} else {
			s += pareto(r, tailMin, 1.5)
		}
		out = append(out, sec(s))
	}
	return out
}

// runKnee feeds arrivals to k, calling Check at every deadline in between as
// a shell with a timer would, and returns the first accepted knee.
func runKnee(k *Knee, ts []time.Time) (first *KneePoint) {
	for _, at := range ts {
		for i, dl := 0, k.NextDeadline(); !dl.IsZero() && !dl.After(at); i, dl = i+1, k.NextDeadline() {
			if i > 1000 {
				panic("knee deadline never goes away")
			}
			if k.Check(dl) && first == nil {
				p := k.Accepted()[0]
				first = &p
			}
		}
		if k.Arrive(at) && first == nil {
			p := k.Accepted()[0]
			first = &p
		}
	}
	return first
}

// TestKneePaperScenario: 100 hosts, the first 80 with exponential
// inter-arrival times (mean 1 s), then a heavy tail (Pareto gaps of at
// least 20 s, alpha 1.5). The first accepted knee is where
// the tail begins, never before the minimum percent.
func TestKneePaperScenario(t *testing.T) {
	const runs = 300
	nearTail := 0
	for seed := int64(1); seed <= runs; seed++ {
		r := rand.New(rand.NewSource(seed))
		ts := arrivals(r, 100, 80, 20)
		k := mustKnee(t, KneeConfig{Expected: 100, MinPercent: 50})
		first := runKnee(k, ts)
		if first == nil {
			t.Fatalf("seed %d: no knee", seed)
		}
		for _, p := range k.Knees() {
			if p.Accepted && p.Arrivals < 50 {
				t.Fatalf("seed %d: knee accepted at %d arrivals, below 50%%", seed, p.Arrivals)
			}
			if !p.Accepted && p.Arrivals >= 50 {
				t.Fatalf("seed %d: knee at %d arrivals not accepted", seed, p.Arrivals)
			}
		}
		if first.Arrivals >= 78 && first.Arrivals <= 82 {
			nearTail++
		}
		if seed == 1 && (first.Arrivals < 78 || first.Arrivals > 82) {
			t.Fatalf("seed 1: first knee at %d arrivals, tail begins after 80", first.Arrivals)
		}
	}
	// A few runs see a false knee in the exponential part (arrival 63..75
	// in about 0.5% of seeds); the rest find the tail within two arrivals.
	if nearTail < runs*97/100 {
		t.Fatalf("first knee within 78..82 arrivals in %d of %d runs, want >= 97%%", nearTail, runs)
	}
}

// TestKneeMinPercentSuppresses: a knee at 30 of 100 arrivals is found but not
// accepted under MinPercent 60; the first accepted one is at or after 60.
func TestKneeMinPercentSuppresses(t *testing.T) {
	for seed := int64(1); seed <= 50; seed++ {
		r := rand.New(rand.NewSource(seed))
		ts := arrivals(r, 100, 30, 20)
		k := mustKnee(t, KneeConfig{Expected: 100, MinPercent: 60})
		first := runKnee(k, ts)
		sawEarly := false
		for _, p := range k.Knees() {
			if p.Arrivals >= 28 && p.Arrivals <= 33 && !p.Accepted {
				sawEarly = true
			}
		}
		if !sawEarly {
			t.Fatalf("seed %d: the knee near 30 arrivals was not recorded: %+v", seed, k.Knees())
		}
		if first != nil && first.Arrivals < 60 {
			t.Fatalf("seed %d: accepted knee at %d < 60", seed, first.Arrivals)
		}
	}
}

func TestKneeMinWait(t *testing.T) {
	setup := func() (*Knee, time.Time) {
		k := mustKnee(t, KneeConfig{Warmup: 2, MinWait: time.Minute})
		k.Arrive(sec(0))
		k.Arrive(sec(1))
		return k, k.NextDeadline()
	}
	// The knee comes before MinWait: recorded, not accepted, accepted at
	// first+MinWait while the next arrival is still overdue.
	k, dl := setup()
	if !dl.Before(sec(60)) {
		t.Fatalf("test needs an early threshold, got %v", dl.Sub(t0))
	}
	if k.Check(dl) {
		t.Fatal("knee accepted before MinWait")
	}
	if ks := k.Knees(); len(ks) != 1 || ks[0].Accepted {
		t.Fatalf("knees %+v", ks)
	}
	if got := k.NextDeadline(); !got.Equal(sec(60)) {
		t.Fatalf("deadline %v, want end of MinWait", got.Sub(t0))
	}
	if k.Check(sec(59.999)) {
		t.Fatal("accepted before MinWait")
	}
	if !k.Check(sec(60)) {
		t.Fatal("not accepted at the end of MinWait")
	}
	if ks := k.Knees(); len(ks) != 1 || !ks[0].Accepted || !ks[0].AcceptedAt.Equal(sec(60)) || !ks[0].At.Equal(dl) {
		t.Fatalf("knees %+v", ks)
	}
	// An arrival before MinWait ends the overdue gap: the early knee stays
	// unaccepted.
	k, dl = setup()
	k.Check(dl)
	k.Arrive(sec(30))
	k.Check(sec(60))
	ks := k.Knees()
	if len(ks) == 0 || ks[0].Accepted {
		t.Fatalf("stale knee accepted: %+v", ks)
	}
	for _, p := range ks[1:] {
		if p.Arrivals != 3 { // only a new knee of the new gap may be accepted
			t.Fatalf("knees %+v", ks)
		}
	}
	// Checked only after MinWait: accepted at once, AcceptedAt = MinWait end.
	k, dl = setup()
	if !k.Check(sec(100)) {
		t.Fatal("late check did not accept")
	}
	if ks := k.Knees(); !ks[0].At.Equal(dl) || !ks[0].AcceptedAt.Equal(sec(60)) {
		t.Fatalf("knees %+v", ks)
	}
}

// TestKneeMultiple: three regimes (fast, medium, slow) give accepted knees
// at both transitions.
func TestKneeMultiple(t *testing.T) {
	const runs = 100
	both := 0
	for seed := int64(1); seed <= runs; seed++ {
		r := rand.New(rand.NewSource(seed))
		ts := []time.Time{t0}
		s := 0.0
		for i := 1; i < 100; i++ {
			switch {
			case i < 40:
				s += r.ExpFloat64()
			case i < 70:
				s += 40 * r.ExpFloat64()
			default:
				s += 2000 * r.ExpFloat64()
			}
			ts = append(ts, sec(s))
		}
		k := mustKnee(t, KneeConfig{Expected: 100, MinPercent: 20})
		runKnee(k, ts)
		var first, second bool
		for _, p := range k.Accepted() {
			if p.Arrivals >= 37 && p.Arrivals <= 43 {
				first = true
			}
			if p.Arrivals >= 67 && p.Arrivals <= 73 {
				second = true
			}
		}
		if len(k.Accepted()) < 2 {
			t.Fatalf("seed %d: %d accepted knees, want several", seed, len(k.Accepted()))
		}
		if first && second {
			both++
		}
	}
	if both < runs*9/10 {
		t.Fatalf("knees at both transitions in %d of %d runs", both, runs)
	}
}

func TestKneeConfigValidate(t *testing.T) {
	cases := []struct {
		cfg  KneeConfig
		want error
	}{
		{KneeConfig{Expected: -1}, ErrBadExpected},
		{KneeConfig{Expected: 10, MinPercent: -0.1}, ErrBadPercent},
		{KneeConfig{Expected: 10, MinPercent: 100.1}, ErrBadPercent},
		{KneeConfig{Expected: 10, MinPercent: math.NaN()}, ErrBadPercent},
		{KneeConfig{MinPercent: 10}, ErrBadExpected},
		{KneeConfig{MinWait: -time.Second}, ErrNegativeDuration},
		{KneeConfig{Warmup: -1}, ErrBadWarmup},
		{KneeConfig{Warmup: 1}, ErrBadWarmup},
	}
	for _, c := range cases {
		err := c.cfg.Validate()
		if !errors.Is(err, c.want) || !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: err %v, want %v", c.cfg, err, c.want)
		}
		if k, err := NewKnee(c.cfg); k != nil || err == nil {
			t.Errorf("NewKnee(%+v) accepted", c.cfg)
		}
	}
	for _, ok := range []KneeConfig{{}, {Expected: 10, MinPercent: 100, MinWait: time.Second, Warmup: 2}, {Expected: 1, MinPercent: 0.5}} {
		if err := ok.Validate(); err != nil {
			t.Errorf("%+v: %v", ok, err)
		}
	}
}

func TestPercentCount(t *testing.T) {
	cases := []struct {
		p     float64
		total int
		want  int
	}{
		{0, 100, 0}, {50, 100, 50}, {60, 100, 60}, {33.3, 3, 1}, {34, 3, 2}, {100, 7, 7},
		{0.1, 7, 1}, {70, 10, 7}, {10, 0, 0}, {50, 5, 3}, {20, 5, 1},
	}
	for _, c := range cases {
		if got := percentCount(c.p, c.total); got != c.want {
			t.Errorf("percentCount(%v, %d) = %d, want %d", c.p, c.total, got, c.want)
		}
	}
}
