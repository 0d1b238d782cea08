package reduction

import (
	"fmt"
	"math"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
)

// Completion reasons of a knee policy (ReduceReply.completed_by).
const (
	CompletedByKnee       = "knee"
	CompletedByMaxObjects = "max_objects"
	CompletedByAll        = "all_sources"
)

func validateKnee(k *messages.ReduceKnee, sources int) error {
	switch {
	case math.IsNaN(k.GetMinPercent()) || k.GetMinPercent() < 0 || k.GetMinPercent() > 100:
		return fmt.Errorf("min_percent %v outside 0..100", k.GetMinPercent())
	case k.GetMaxObjects() < 0 || int(k.GetMaxObjects()) > sources:
		return fmt.Errorf("max_objects %d outside 0..%d", k.GetMaxObjects(), sources)
	case k.GetMinWaitMs() < 0:
		return fmt.Errorf("negative min_wait_ms %d", k.GetMinWaitMs())
	case k.GetWarmup() < 0 || k.GetWarmup() == 1:
		return fmt.Errorf("warmup %d: 0 (default) or at least 2", k.GetWarmup())
	case k.GetMaxObjects() > 0 && int(k.GetMaxObjects()) < minCount(k, sources):
		return fmt.Errorf("max_objects %d is below min_percent %v of %d sources", k.GetMaxObjects(), k.GetMinPercent(), sources)
	}
	return nil
}

// minCount is how many sources min_percent asks for (at least one).
func minCount(k *messages.ReduceKnee, sources int) int {
	return max(1, int(math.Ceil(k.GetMinPercent()/100*float64(sources)-1e-9)))
}

// KneeGate decides how many sources a Reduce with a knee policy reduces:
// it watches the sources' arrival times with the partial barriers' knee
// detector and fixes the count at the first accepted knee, at max_objects
// arrivals, or when every source has arrived. It is pure: the shell feeds
// it arrivals and the clock, and asks again at NextDeadline.
type KneeGate struct {
	knee    *policy.Knee
	sources int
	max     int
	need    int
	arrived map[string]bool
	num     int
	reason  string
}

// NewKneeGate returns the gate of a validated request's knee policy.
func NewKneeGate(req *messages.Reduce) (*KneeGate, error) {
	k := req.GetKnee()
	n := len(req.GetSourceIds())
	if err := validateKnee(k, n); err != nil {
		return nil, err
	}
	warmup := int(k.GetWarmup())
	if warmup == 0 {
		// The averages need samples (with few, nearly every gap looks like
		// a knee: policy.DefaultKneeWarmup), but a knee before min_percent
		// is not accepted anyway: arm when the minimum has arrived.
		warmup = max(2, min(policy.DefaultKneeWarmup, minCount(k, n)))
	}
	det, err := policy.NewKnee(policy.KneeConfig{Expected: n, MinPercent: k.GetMinPercent(),
		MinWait: time.Duration(k.GetMinWaitMs()) * time.Millisecond, Warmup: warmup})
	if err != nil {
		return nil, err
	}
	maxN := int(k.GetMaxObjects())
	if maxN == 0 {
		maxN = n
	}
	return &KneeGate{knee: det, sources: n, max: maxN, need: minCount(k, n), arrived: map[string]bool{}}, nil
}

// Arrive records that source id became available at now. It reports the
// number to reduce once that is fixed (0 before).
func (g *KneeGate) Arrive(id string, now time.Time) int {
	if g.num > 0 || g.arrived[id] {
		return g.num
	}
	g.arrived[id] = true
	knee := g.knee.Arrive(now)
	switch {
	case len(g.arrived) == g.sources:
		g.fix(min(g.sources, g.max), CompletedByAll)
	case len(g.arrived) >= g.max:
		g.fix(g.max, CompletedByMaxObjects)
	case knee:
		// The knee was due before this arrival: the count is what had
		// arrived by then.
		g.fix(g.kneeCount(), CompletedByKnee)
	}
	return g.num
}

// Check reports the number to reduce if a knee became known by now.
func (g *KneeGate) Check(now time.Time) int {
	if g.num == 0 && g.knee.Check(now) {
		g.fix(g.kneeCount(), CompletedByKnee)
	}
	return g.num
}

func (g *KneeGate) kneeCount() int {
	ks := g.knee.Knees()
	for i := len(ks) - 1; i >= 0; i-- {
		if ks[i].Accepted {
			return min(ks[i].Arrivals, g.max)
		}
	}
	return min(len(g.arrived), g.max)
}

func (g *KneeGate) fix(n int, reason string) { g.num, g.reason = n, reason }

// NextDeadline is when Check could next fix the count (zero: only an
// arrival can).
func (g *KneeGate) NextDeadline() time.Time {
	if g.num > 0 {
		return time.Time{}
	}
	return g.knee.NextDeadline()
}

// Num is the number to reduce, 0 until fixed.
func (g *KneeGate) Num() int { return g.num }

// Reason says what fixed Num.
func (g *KneeGate) Reason() string { return g.reason }

// Arrived is how many distinct sources have arrived.
func (g *KneeGate) Arrived() int { return len(g.arrived) }

// Needed is how many arrivals min_percent asks for before any knee.
func (g *KneeGate) Needed() int { return g.need }
