package policy

import (
	"fmt"
	"math"
	"time"
)

// Knee detector constants, from section 4 of the paper.
const (
	// KneeArrWeight is the weight of the old value in the EWMA of arrival
	// times: arr = 0.70*arr + 0.30*sample.
	KneeArrWeight = 0.70
	// KneeVarWeight is the weight of the old value in the EWMA of the
	// deviation: arrvar = 0.75*arrvar + 0.25*|sample - arr|.
	KneeVarWeight = 0.75
	// KneeVarFactor is the k of the threshold arr + k*arrvar.
	KneeVarFactor = 4
	// DefaultKneeWarmup is the number of arrivals the detector waits for
	// before it arms its threshold when KneeConfig.Warmup is 0. With fewer
	// samples the averages carry almost no scale (the first sample is 0 by
	// definition) and nearly every early gap looks like a knee; in
	// simulations of exponential arrivals, 8 arrivals bring the rate of such
	// start-up knees down to a few percent of runs.
	DefaultKneeWarmup = 8
)

// KneeConfig configures a Knee detector.
type KneeConfig struct {
	// Expected is the number of participants expected (the barrier's max).
	// It is only used for MinPercent; 0 means unknown.
	Expected int
	// MinPercent (0..100) of Expected must have arrived before a knee is
	// acceptable. 0 disables the check.
	MinPercent float64
	// MinWait must have passed since the first arrival before a knee is
	// acceptable. 0 disables the check.
	MinWait time.Duration
	// Warmup is the number of arrivals before the threshold is armed:
	// 0 means DefaultKneeWarmup, otherwise it must be at least 2.
	Warmup int
}

// Validate reports whether the configuration is usable.
func (c KneeConfig) Validate() error {
	if c.Expected < 0 {
		return invalid(ErrBadExpected, "Expected=%d", c.Expected)
	}
	if !validPercent(c.MinPercent) {
		return invalid(ErrBadPercent, "MinPercent=%v", c.MinPercent)
	}
	if c.MinPercent > 0 && c.Expected == 0 {
		return invalid(ErrBadExpected, "MinPercent=%v needs Expected > 0", c.MinPercent)
	}
	if c.MinWait < 0 {
		return invalid(ErrNegativeDuration, "MinWait=%v", c.MinWait)
	}
	if c.Warmup < 0 || c.Warmup == 1 {
		return invalid(ErrBadWarmup, "Warmup=%d", c.Warmup)
	}
	return nil
}

// KneePoint is one knee found by a Knee detector.
type KneePoint struct {
	// Arrivals is the number of arrivals when the knee was detected (the
	// next arrival was overdue after this many).
	Arrivals int
	// At is the instant the threshold arr + 4*arrvar passed without an
	// arrival.
	At time.Time
	// Accepted tells whether the knee met MinPercent and MinWait. A knee that
	// was too early only because of MinWait becomes accepted at
	// first arrival + MinWait if the next arrival is still overdue then.
	Accepted bool
	// AcceptedAt is the instant the knee became acceptable (zero if never).
	AcceptedAt time.Time
}

// Knee is the on-line knee detector of the paper's section 4.
//
// Reading of the paper. A sample is the arrival time of a host, measured
// from the first arrival (the paper's figure 4 plots host arrival time
// against the threshold line, and it calls the sample the latest arrival
// time recorded); it is not the inter-arrival gap. On each arrival the
// deviation of the sample from the current average is taken first, and only
// then are both averages recomputed, as in TCP's retransmission timer that
// inspired the heuristic (RFC 6298 also updates RTTVAR with the old SRTT):
//
//	arrvar = 0.75*arrvar + 0.25*|sample - arr|   (arr before this update)
//	arr    = 0.70*arr    + 0.30*sample
//
// The first arrival sets arr = 0 and arrvar = 0. After the update, the next
// host is expected by first + arr + 4*arrvar; if that instant passes before
// the next arrival, a knee is detected, with the count of arrivals so far.
// Detection then continues: the late arrival updates the averages and arms a
// new threshold, so several knees may be found. A knee is acceptable only
// once MinPercent of Expected have arrived and MinWait has passed since the
// first arrival; unacceptable knees are kept in the list too.
//
// With a steady arrival rate the average lags the latest arrival by about
// 2.3 gaps and arrvar settles near 3.3 gaps, so the threshold sits about 11
// mean gaps after the latest arrival.
type Knee struct {
	cfg    KneeConfig
	need   int // arrivals needed for MinPercent
	warmup int

	now    time.Time // latest time seen
	first  time.Time
	n      int
	arr    float64 // nanoseconds since first
	arrvar float64 // nanoseconds

	knees   []KneePoint
	pending int // index in knees of the knee of the current gap, or -1
}

// NewKnee returns a detector, or an error wrapping ErrInvalidOptions.
func NewKnee(cfg KneeConfig) (*Knee, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := cfg.Warmup
	if w == 0 {
		w = DefaultKneeWarmup
	}
	return &Knee{cfg: cfg, need: percentCount(cfg.MinPercent, cfg.Expected), warmup: w, pending: -1}, nil
}

// Arrive records an arrival at now. It first runs Check(now), so a knee that
// became due before this arrival is detected even if the caller never called
// Check; the result is that of this Check.
func (k *Knee) Arrive(now time.Time) (knee bool) {
	now = k.clamp(now)
	knee = k.check(now)
	if k.n == 0 {
		k.first = now
		k.arr, k.arrvar = 0, 0
	} else {
		sample := float64(now.Sub(k.first))
		k.arrvar = KneeVarWeight*k.arrvar + (1-KneeVarWeight)*math.Abs(sample-k.arr)
		k.arr = KneeArrWeight*k.arr + (1-KneeArrWeight)*sample
	}
	k.n++
	k.pending = -1
	return knee
}

// Check reports whether an acceptable knee became known at now: either the
// threshold passed without an arrival (and the knee is acceptable), or an
// earlier knee of the current gap became acceptable because MinWait passed.
// It is edge-triggered: each knee makes Check return true at most once.
func (k *Knee) Check(now time.Time) (knee bool) {
	return k.check(k.clamp(now))
}

func (k *Knee) check(now time.Time) bool {
	if k.n < k.warmup {
		return false
	}
	if k.pending < 0 {
		dl := k.threshold()
		if now.Before(dl) {
			return false
		}
		k.knees = append(k.knees, KneePoint{Arrivals: k.n, At: dl})
		k.pending = len(k.knees) - 1
	}
	p := &k.knees[k.pending]
	if p.Accepted || k.n < k.need {
		return false
	}
	at := p.At
	if mw := k.first.Add(k.cfg.MinWait); at.Before(mw) {
		at = mw
	}
	if now.Before(at) {
		return false
	}
	p.Accepted, p.AcceptedAt = true, at
	return true
}

// NextDeadline is the next instant at which Check could report a knee:
// the threshold of the current gap, or the end of MinWait for a knee that
// is waiting for it. It is zero when nothing can happen before the next
// arrival.
func (k *Knee) NextDeadline() time.Time {
	if k.n < k.warmup {
		return time.Time{}
	}
	if k.pending < 0 {
		return k.threshold()
	}
	p := k.knees[k.pending]
	if p.Accepted || k.n < k.need {
		return time.Time{}
	}
	mw := k.first.Add(k.cfg.MinWait)
	if mw.Before(p.At) {
		return p.At
	}
	return mw
}

// Threshold is the instant first + arr + 4*arrvar by which the next
// arrival is expected (zero before the first arrival).
func (k *Knee) Threshold() time.Time {
	if k.n == 0 {
		return time.Time{}
	}
	return k.threshold()
}

func (k *Knee) threshold() time.Time {
	return k.first.Add(floatDuration(k.arr + KneeVarFactor*k.arrvar))
}

// Estimate returns the current averages arr and arrvar.
func (k *Knee) Estimate() (arr, arrvar time.Duration) {
	return floatDuration(k.arr), floatDuration(k.arrvar)
}

// Arrivals is the number of arrivals recorded.
func (k *Knee) Arrivals() int { return k.n }

// Knees returns a copy of every knee found, accepted or not, in order.
func (k *Knee) Knees() []KneePoint { return append([]KneePoint(nil), k.knees...) }

// Accepted returns the accepted knees, in order.
func (k *Knee) Accepted() []KneePoint {
	var out []KneePoint
	for _, p := range k.knees {
		if p.Accepted {
			out = append(out, p)
		}
	}
	return out
}

func (k *Knee) clamp(now time.Time) time.Time {
	if now.Before(k.now) {
		return k.now
	}
	k.now = now
	return now
}

// floatDuration converts nanoseconds to a Duration, saturating.
func floatDuration(ns float64) time.Duration {
	switch {
	case math.IsNaN(ns):
		return 0
	case ns >= math.MaxInt64:
		return math.MaxInt64
	case ns <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(math.Round(ns))
}

func validPercent(p float64) bool { return !math.IsNaN(p) && p >= 0 && p <= 100 }

// percentCount is the number of participants, out of total, that makes
// percent; 0 when percent is 0.
func percentCount(percent float64, total int) int {
	if percent <= 0 || total <= 0 {
		return 0
	}
	n := int(math.Ceil(percent*float64(total)/100 - 1e-9))
	if n < 1 {
		n = 1
	}
	if n > total {
		n = total
	}
	return n
}

func invalid(specific error, format string, args ...any) error {
	return fmt.Errorf("%w: %w: "+format, append([]any{ErrInvalidOptions, specific}, args...)...)
}
