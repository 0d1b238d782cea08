package netmodel

import (
	"math"
	"testing"
	"time"
)

func TestEstimatorStartsAtDefaultsAndFollowsObservations(t *testing.T) {
	e := NewEstimates(100*time.Microsecond, 1e9)
	if l, b, nl, nb := e.Estimate(); l != 100*time.Microsecond || b != 1e9 || nl != 0 || nb != 0 {
		t.Fatalf("defaults: %v %v %d %d", l, b, nl, nb)
	}
	e.ObserveLatency(50 * time.Microsecond) // the first sample replaces the default
	e.ObserveLatency(150 * time.Microsecond)
	if l, _, nl, _ := e.Estimate(); l != 50*time.Microsecond || nl != 2 {
		t.Fatalf("L = %v after 50, 150 µs (want their minimum, 50 µs), %d samples", l, nl)
	}
	e.ObserveTransfer(1<<20, time.Millisecond) // 1.048576e9 B/s
	e.ObserveTransfer(2<<20, time.Millisecond)
	want := 0.8*1.048576e9 + 0.2*2.097152e9
	if _, b, _, nb := e.Estimate(); math.Abs(b-want) > 1 || nb != 2 {
		t.Fatalf("B = %v, want %v (%d samples)", b, want, nb)
	}
	e.ObserveTransfer(0, time.Second)
	e.ObserveTransfer(10, 0)
	e.ObserveLatency(-1)
	if _, _, nl, nb := e.Estimate(); nl != 2 || nb != 2 {
		t.Fatal("meaningless observations were counted")
	}
}

// Samples taken while bulk data queues on the link do not raise L while a
// recent sample shows the real latency; once a whole window says the
// path is slower, L follows.
func TestEstimatorLatencyIgnoresQueueingButFollowsARealChange(t *testing.T) {
	e := NewEstimates(time.Millisecond, 1e9)
	e.ObserveLatency(200 * time.Microsecond)
	for range latencyWindow - 1 {
		e.ObserveLatency(300 * time.Millisecond) // behind a 32 MiB transfer
	}
	if l, _, _, _ := e.Estimate(); l != 200*time.Microsecond {
		t.Fatalf("L = %v during queueing, want the 200 µs path latency", l)
	}
	e.ObserveLatency(5 * time.Millisecond) // the 200 µs sample leaves the window
	if l, _, _, _ := e.Estimate(); l != 5*time.Millisecond {
		t.Fatalf("L = %v once the window holds only slower samples, want 5 ms", l)
	}
}

// TestEstimatorTakesAPeersBandwidthOnlyBeforeItsOwn: a peer's B stands
// in while nothing was measured here, and never overrides a measurement.
func TestEstimatorTakesAPeersBandwidthOnlyBeforeItsOwn(t *testing.T) {
	e := NewEstimates(100*time.Microsecond, 0)
	for _, bad := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		e.ObservePeer(bad)
	}
	if _, b, _, n := e.Estimate(); b != 0 || n != 0 {
		t.Fatalf("after invalid peer estimates: B %v from %d samples, want none", b, n)
	}
	e.ObservePeer(47e6)
	if _, b, _, n := e.Estimate(); b != 47e6 || n != 1 {
		t.Fatalf("after a peer's 47 MB/s: B %v from %d samples", b, n)
	}
	e.ObservePeer(1e9) // another peer's: this member already has an estimate
	if _, b, _, _ := e.Estimate(); b != 47e6 {
		t.Fatalf("a second peer estimate replaced the first: B %v", b)
	}
	e.ObserveTransfer(50e6, time.Second) // its own measurement refines it
	if _, b, _, n := e.Estimate(); b != 0.8*47e6+0.2*50e6 || n != 2 {
		t.Fatalf("after a transfer: B %v from %d samples", b, n)
	}
}
