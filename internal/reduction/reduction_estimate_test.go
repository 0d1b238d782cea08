package reduction

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// The plan reports the estimate it was chosen with, taken when S is known
// (the first arrival), and how many observations L and B rest on.
func TestPlanReportsTheEstimateAndItsSamples(t *testing.T) {
	e := estimator.New(100*time.Microsecond, 1.25e9)
	e.ObserveLatency(300 * time.Microsecond) // before the Reduce
	r := newRed(request(ids("s", 4), 4), Config{Estimator: e})
	// Measured after the Reduce started and before its first source
	// arrived: the plan must use these.
	e.ObserveLatency(200 * time.Microsecond)
	e.ObserveTransfer(50e6, time.Second)
	e.ObserveTransfer(70e6, time.Second)
	wantL, wantB, nl, nb := e.Estimate()
	r.Step(t0, located("s0", bigSize, node(0)))
	e.ObserveTransfer(1e9, time.Second) // after the plan was fixed: not in it
	for i := 1; i < 4; i++ {
		r.Step(t0, located(ids("s", 4)[i], bigSize, node(i)))
	}
	p := r.plan
	if time.Duration(p.GetLatencyNs()) != wantL || p.GetBandwidth() != wantB ||
		p.GetLatencySamples() != int64(nl) || p.GetBandwidthSamples() != int64(nb) || nl != 2 || nb != 2 {
		t.Fatalf("plan L=%v B=%v (%d, %d samples), want L=%v B=%v (%d, %d samples)", time.Duration(p.GetLatencyNs()),
			p.GetBandwidth(), p.GetLatencySamples(), p.GetBandwidthSamples(), wantL, wantB, nl, nb)
	}
	// The degree follows the reported estimate, not the defaults given to
	// NewReduction.
	if d, _ := plan.ChooseDegree(4, wantL, wantB, bigSize, 4); int(p.GetDegree()) != d {
		t.Fatalf("degree %d, the estimate's choice is %d", p.GetDegree(), d)
	}

	// Without an estimator: the values given, whose origin is not known.
	r = newRed(request(ids("s", 4), 4), Config{})
	r.Step(t0, located("s0", bigSize, node(0)))
	if p := r.plan; time.Duration(p.GetLatencyNs()) != 100*time.Microsecond || p.GetBandwidth() != 1.25e9 ||
		p.GetLatencySamples() != -1 || p.GetBandwidthSamples() != -1 {
		t.Fatalf("plan without estimator: %v", p)
	}
}

// A task marks a child input complete exactly when it is a leaf's source
// whose copy on the leaf's node was whole when the task was sent: only
// then may the worker take its stream's time as the link's.
func TestTasksMarkWholeLeafInputs(t *testing.T) {
	src := ids("s", 8)
	for _, d := range []int{1, 2, 8} {
		r := newRed(request(src, 8), Config{ForceDegree: d})
		whole := map[string]bool{}
		var pending []*messages.ReduceTask
		var marked, unmarked int
		check := func(fx Effects) {
			t.Helper()
			for _, tk := range fx.Tasks() {
				for _, c := range tk.Task.GetChildren() {
					isSource := c.GetObjectId()[0] != 0
					if want := isSource && whole[c.GetObjectId()]; c.GetComplete() != want {
						t.Fatalf("d=%d: position %d's input %q complete=%v, want %v", d, tk.Task.GetPosition(), c.GetObjectId(), c.GetComplete(), want)
					}
					if c.GetComplete() {
						marked++
					} else if isSource {
						unmarked++
					}
				}
				pending = append(pending, tk.Task)
			}
		}
		for i, id := range src {
			n := node(i)
			switch i % 4 {
			case 0: // arrives whole
				whole[id] = true
				check(r.Step(t0, &messages.LocationUpdate{ObjectId: id, Size: bigSize, Node: n, State: messages.LocationState_COMPLETE}))
			case 1: // arrives partial; a copy elsewhere completing says nothing about this one
				check(r.Step(t0, located(id, bigSize, n)))
				check(r.Step(t0, &messages.LocationUpdate{ObjectId: id, Size: bigSize, Node: node(99), State: messages.LocationState_COMPLETE}))
			case 2: // arrives partial, its Put finishes before its parent's task
				check(r.Step(t0, located(id, bigSize, n)))
				whole[id] = true
				check(r.Step(t0, &messages.LocationUpdate{ObjectId: id, Size: bigSize, Node: n, State: messages.LocationState_COMPLETE}))
			case 3: // stays partial
				check(r.Step(t0, located(id, bigSize, n)))
			}
		}
		for len(pending) > 0 {
			tk := pending[0]
			pending = pending[1:]
			check(r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: tk.GetPosition(), Generation: tk.GetGeneration()}))
		}
		if r.tree == nil || r.tree.gen[r.tree.tree.Root()] == 0 {
			t.Fatalf("d=%d: the root never got its task", d)
		}
		if d > 1 && (marked == 0 || unmarked == 0) {
			t.Fatalf("d=%d: %d inputs marked complete, %d leaf inputs not: the case does not discriminate", d, marked, unmarked)
		}
	}
}

// With no bandwidth measured (a member's B starts unknown, 0), the plan is
// the chain however large the measured L: a guessed B against an L taken
// under load chose binary trees that took half as long again.
func TestUnknownBandwidthPlansAChain(t *testing.T) {
	e := estimator.New(100*time.Microsecond, 0)
	e.ObserveLatency(15 * time.Millisecond) // Puts queued behind bulk copies
	r := newRed(request(ids("s", 8), 8), Config{Estimator: e})
	for i, id := range ids("s", 8) {
		r.Step(t0, located(id, bigSize, node(i)))
	}
	if p := r.plan; p.GetDegree() != 1 || p.GetBandwidthSamples() != 0 {
		t.Fatalf("unknown B: degree %d (%d bandwidth samples), want the chain", p.GetDegree(), p.GetBandwidthSamples())
	}
	// Once B is measured the model decides: a slow link and a large L
	// still make the chain; a fast link with the same L a wider tree.
	e.ObserveTransfer(50e6, time.Second) // 400 Mbit/s
	r = newRed(request(ids("s", 8), 8), Config{Estimator: e})
	for i, id := range ids("s", 8) {
		r.Step(t0, located(id, bigSize, node(i)))
	}
	want, _ := plan.ChooseDegree(8, 15*time.Millisecond, 50e6, bigSize, 8)
	if got := r.plan.GetDegree(); int(got) != want {
		t.Fatalf("measured B: degree %d, the model's choice is %d", got, want)
	}
}

// A stated shaper (the members' -link-rate and -link-burst) reaches the
// plan: behind a burst that passes a 64 KiB chunk at once, 64 sources of
// 1 MiB on a 400 Mbit/s link stay a chain, where unshaped links make the
// binary tree cheaper; a B the shaper's rate does not bound (a host's CPU
// per byte) gets no credit.
func TestPlanPricesTheStatedShaper(t *testing.T) {
	const B = 400e6 / 8 * 1448 / 1538
	L := 44 * time.Microsecond
	src := ids("s", 64)
	degree := func(cfg Config) int32 {
		cfg.Estimator = estimator.New(L, B)
		r := newRed(request(src, 64), cfg)
		for i, id := range src {
			r.Step(t0, located(id, bigSize, node(i)))
		}
		return r.plan.GetDegree()
	}
	if d, _ := plan.ChooseDegree(64, L, B, bigSize, 64); d != 2 || degree(Config{}) != 2 {
		t.Fatalf("unshaped: the model's degree %d, the plan's %d; want 2", d, degree(Config{}))
	}
	if got := degree(Config{Shaper: plan.Shaper{Rate: B, Burst: 200e3}}); got != 1 {
		t.Errorf("behind a 200 KB burst: degree %d, want the chain", got)
	}
	if got := degree(Config{Shaper: plan.Shaper{Rate: 4 * B, Burst: 200e3}}); got != 2 {
		t.Errorf("a link four times B: degree %d, want 2 (no credit)", got)
	}
}
