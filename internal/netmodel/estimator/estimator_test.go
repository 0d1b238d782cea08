package estimator

import (
	"sync"
	"testing"
	"time"
)

// Shells observe and read from their own goroutines at once; every
// observation counts once, and the estimates are those of the samples
// (run with -race: the lock is what makes it safe).
func TestEstimatorSharedByConcurrentObservers(t *testing.T) {
	e := New(time.Millisecond, 0)
	const workers, each = 4, 200
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				e.ObserveLatency(time.Duration(100+w+i) * time.Microsecond)
				e.ObserveTransfer(1<<20, time.Millisecond)
				e.Estimate()
			}
		}()
	}
	wg.Wait()
	l, b, nl, nb := e.Estimate()
	if nl != workers*each || nb != workers*each {
		t.Fatalf("%d latency and %d bandwidth samples, want %d each", nl, nb, workers*each)
	}
	if l < 100*time.Microsecond || l > time.Millisecond {
		t.Fatalf("L = %v, not among the samples' range", l)
	}
	if want := float64(1<<20) / 1e-3; b < want*0.999 || b > want*1.001 {
		t.Fatalf("B = %v, want %v (every transfer had that rate)", b, want)
	}
}
