package reduction

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func kneeReq(n int, k *messages.ReduceKnee) *messages.Reduce {
	return &messages.Reduce{TargetId: "t", SourceIds: ids("s", n), Knee: k, Op: messages.ReduceOp_SUM, Dtype: messages.DType_FLOAT32}
}

// drive feeds arrivals at the given offsets (checking the gate at every
// millisecond in between, as the actor's timer would) and returns the
// count and the instant it was fixed.
func drive(t *testing.T, g *KneeGate, offsets []time.Duration, end time.Duration) (int, time.Duration) {
	t.Helper()
	next := 0
	for now := time.Duration(0); now <= end; now += time.Millisecond {
		for next < len(offsets) && offsets[next] <= now {
			if n := g.Arrive(fmt.Sprintf("s%d", next), t0.Add(offsets[next])); n > 0 {
				return n, now
			}
			next++
		}
		if n := g.Check(t0.Add(now)); n > 0 {
			return n, now
		}
	}
	return 0, end
}

func TestKneeGateFixesTheCountAtTheKnee(t *testing.T) {
	// Ten fast workers every 10 ms, then six stragglers a second later.
	var offsets []time.Duration
	for i := range 10 {
		offsets = append(offsets, time.Duration(i)*10*time.Millisecond)
	}
	for i := range 6 {
		offsets = append(offsets, time.Second+time.Duration(i)*10*time.Millisecond)
	}
	g, err := NewKneeGate(kneeReq(16, &messages.ReduceKnee{MinPercent: 50}))
	if err != nil {
		t.Fatal(err)
	}
	n, at := drive(t, g, offsets, 2*time.Second)
	if n != 10 || g.Reason() != CompletedByKnee {
		t.Fatalf("fixed %d by %q, want the 10 fast ones by the knee", n, g.Reason())
	}
	if at >= time.Second {
		t.Fatalf("fixed at %v: not before the stragglers", at)
	}
}

func TestKneeGateMinPercentSuppressesAnEarlyKnee(t *testing.T) {
	// Four fast, a pause, then four more: with min 75 % of 8 the pause
	// after four is no knee.
	offsets := []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond,
		500 * time.Millisecond, 510 * time.Millisecond, 520 * time.Millisecond, 2 * time.Second}
	g, err := NewKneeGate(kneeReq(8, &messages.ReduceKnee{MinPercent: 75, Warmup: 2}))
	if err != nil {
		t.Fatal(err)
	}
	n, at := drive(t, g, offsets, 3*time.Second)
	if n != 7 || at < 520*time.Millisecond || at >= 2*time.Second || g.Reason() != CompletedByKnee {
		t.Fatalf("fixed %d at %v by %q, want 7 by the knee after the sixth-to-seventh arrivals", n, at, g.Reason())
	}
	// Without the minimum the pause after four is the knee.
	g, _ = NewKneeGate(kneeReq(8, &messages.ReduceKnee{Warmup: 4}))
	if n, at := drive(t, g, offsets, 3*time.Second); n != 4 || at >= 500*time.Millisecond {
		t.Fatalf("without min_percent: fixed %d at %v, want 4 before the pause ends", n, at)
	}
}

func TestKneeGateMaxObjectsAndAllSources(t *testing.T) {
	steady := func(n int) []time.Duration {
		var out []time.Duration
		for i := range n {
			out = append(out, time.Duration(i)*time.Millisecond)
		}
		return out
	}
	g, _ := NewKneeGate(kneeReq(8, &messages.ReduceKnee{MinPercent: 25, MaxObjects: 3}))
	if n, _ := drive(t, g, steady(8), time.Second); n != 3 || g.Reason() != CompletedByMaxObjects {
		t.Fatalf("fixed %d by %q, want 3 by max_objects", n, g.Reason())
	}
	g, _ = NewKneeGate(kneeReq(4, &messages.ReduceKnee{MinPercent: 100}))
	if n, _ := drive(t, g, steady(4), time.Second); n != 4 || g.Reason() != CompletedByAll {
		t.Fatalf("fixed %d by %q, want all 4", n, g.Reason())
	}
	// A source arriving twice (a resubscription) counts once.
	g, _ = NewKneeGate(kneeReq(3, &messages.ReduceKnee{MinPercent: 100}))
	g.Arrive("s0", t0)
	g.Arrive("s0", t0.Add(time.Millisecond))
	g.Arrive("s1", t0.Add(2*time.Millisecond))
	if g.Num() != 0 || g.Arrived() != 2 {
		t.Fatalf("after s0 twice and s1: num %d, arrived %d", g.Num(), g.Arrived())
	}
}

func TestKneeBadInput(t *testing.T) {
	for _, k := range []*messages.ReduceKnee{
		{MinPercent: -1}, {MinPercent: 101}, {MaxObjects: 9}, {MaxObjects: -1}, {MinWaitMs: -5}, {Warmup: 1},
		{MinPercent: 50, MaxObjects: 2},
	} {
		if err := ValidateReduce(kneeReq(8, k), 1024); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("knee %v: %v, want INVALID_ARGUMENT", k, err)
		}
	}
	req := kneeReq(8, &messages.ReduceKnee{MinPercent: 50})
	req.NumObjects = 4
	if err := ValidateReduce(req, 1024); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("num_objects with a knee: %v, want INVALID_ARGUMENT", err)
	}
	if err := ValidateReduce(kneeReq(8, &messages.ReduceKnee{MinPercent: 50, MaxObjects: 6}), 1024); err != nil {
		t.Errorf("a valid knee policy: %v", err)
	}
}
