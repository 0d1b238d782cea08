package netmodel

import (
	"math"
	"time"
)

// Estimates are running estimates of the network latency L and the
// bandwidth B that the cost model needs, from observations the data plane
// reports. They read no clock: callers pass durations they measured. They
// are a plain value; the one a member's shells share is
// internal/netmodel/estimator.Estimator, which locks around them.
type Estimates struct {
	l      time.Duration
	recent [latencyWindow]time.Duration // the last latency samples, a ring
	b      float64
	nl     int
	nb     int
}

// ewmaWeight is the weight of a new bandwidth observation: recent enough
// to follow a changing network, smooth enough to ignore one slow transfer.
const ewmaWeight = 0.2

// latencyWindow is how many latency samples L is the minimum of. Control
// messages share the links with bulk transfers, so most samples taken
// while data flows include queueing behind it (hundreds of ms on a
// shaped 400 Mbit/s link); the minimum of recent samples is the path's
// latency, as TCP's min RTT is. An average of them once made the cost
// model pick a binary tree over a chain for 32 MiB objects.
const latencyWindow = 32

// NewEstimates starts from defaults used until the first observations.
func NewEstimates(defaultL time.Duration, defaultB float64) Estimates {
	return Estimates{l: defaultL, b: defaultB}
}

// ObserveLatency records one one-way control message latency; L is the
// minimum of the last latencyWindow samples.
func (e *Estimates) ObserveLatency(d time.Duration) {
	if d <= 0 {
		return
	}
	e.recent[e.nl%latencyWindow] = d
	e.nl++
	e.l = d
	for _, r := range e.recent[:min(e.nl, latencyWindow)] {
		e.l = min(e.l, r)
	}
}

// ObserveTransfer records a transfer of n bytes that took d.
func (e *Estimates) ObserveTransfer(n int64, d time.Duration) {
	if n <= 0 || d <= 0 {
		return
	}
	bw := float64(n) / d.Seconds()
	if e.nb == 0 {
		e.b = bw
	} else {
		e.b = (1-ewmaWeight)*e.b + ewmaWeight*bw
	}
	e.nb++
}

// ObservePeer takes B from another member's estimate of the same
// network (bytes per second) while this one has measured no transfer:
// it then counts as one sample, which the member's own transfers refine.
// Without it a member that never moved a whole object (one that only
// takes part in sliced AllReduces) would never know B, and could never
// pace the AllReduces it coordinates.
func (e *Estimates) ObservePeer(B float64) {
	if !(B > 0) || math.IsInf(B, 0) {
		return
	}
	if e.nb == 0 {
		e.b, e.nb = B, 1
	}
}

// Estimate returns the current L and B and how many observations of each
// they rest on (0: still the defaults).
func (e *Estimates) Estimate() (L time.Duration, B float64, latencySamples, bandwidthSamples int) {
	return e.l, e.b, e.nl, e.nb
}
