package plan

import (
	"math"
	"testing"
	"time"
)

func TestEstimatorStartsAtDefaultsAndFollowsObservations(t *testing.T) {
	e := NewEstimator(100*time.Microsecond, 1e9)
	if l, b, nl, nb := e.Estimate(); l != 100*time.Microsecond || b != 1e9 || nl != 0 || nb != 0 {
		t.Fatalf("defaults: %v %v %d %d", l, b, nl, nb)
	}
	e.ObserveLatency(50 * time.Microsecond) // the first sample replaces the default
	e.ObserveLatency(150 * time.Microsecond)
	if l, _, nl, _ := e.Estimate(); l != 70*time.Microsecond || nl != 2 {
		t.Fatalf("L = %v after 50, 150 µs (want 0.8·50+0.2·150 = 70 µs), %d samples", l, nl)
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
