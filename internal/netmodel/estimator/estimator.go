// Package estimator shares one member's network estimates
// (netmodel.Estimates) among its shells: every store node and Reduce
// coordinator of a member observes into one Estimator and reads it when
// it plans, from its own goroutine, so it locks. The estimates' arithmetic
// stays in netmodel, which is pure.
package estimator

import (
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/netmodel"
)

// Estimator is netmodel.Estimates, safe for concurrent use.
type Estimator struct {
	mu sync.Mutex
	e  netmodel.Estimates
}

// New starts from defaults used until the first observations.
func New(defaultL time.Duration, defaultB float64) *Estimator {
	return &Estimator{e: netmodel.NewEstimates(defaultL, defaultB)}
}

// ObserveLatency records one one-way control message latency
// (netmodel.Estimates.ObserveLatency).
func (e *Estimator) ObserveLatency(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.e.ObserveLatency(d)
}

// ObserveTransfer records a transfer of n bytes that took d
// (netmodel.Estimates.ObserveTransfer).
func (e *Estimator) ObserveTransfer(n int64, d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.e.ObserveTransfer(n, d)
}

// ObservePeer takes B from another member's estimate while this one has
// measured no transfer (netmodel.Estimates.ObservePeer).
func (e *Estimator) ObservePeer(B float64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.e.ObservePeer(B)
}

// Estimate returns the current L and B and how many observations of each
// they rest on (0: still the defaults).
func (e *Estimator) Estimate() (L time.Duration, B float64, latencySamples, bandwidthSamples int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.e.Estimate()
}
