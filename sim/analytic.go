package sim

import (
	"math"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// Analytic systems: closed-form times of the peers' algorithms and of the
// thesis's cost model on the same links (B the payload rate, L, chunk c).
const (
	SysSim      = "ours"
	SysFailure  = "ours-failure"
	SysBinomial = "mpi-binomial"
	SysChain    = "pipelined-chain"
	SysRing     = "ring"
	// SysThesis is the thesis's eq. 2.1 as published: T(1) = nL + S/B,
	// T(d) = L·log_d n + d·S/B, d chosen from 1, 2 and n (appendix A.1).
	SysThesis = "thesis-T(d)"
	// SysThesisFill is eq. 2.1 with the pipeline's fill: every hop of a
	// path through the tree waits for one chunk (d of them at a node of
	// degree d) before it can pass anything on.
	SysThesisFill = "T(d)+fill"
)

// AnalyticSystems are the curves drawn beside the simulation.
var AnalyticSystems = []string{SysBinomial, SysChain, SysRing, SysThesis, SysThesisFill}

// thesisDegrees are the degrees the published code chose between.
func thesisDegrees(n int) []int {
	if n <= 2 {
		return []int{1, 2}[:n]
	}
	return []int{1, 2, n}
}

// ThesisCost is eq. 2.1 for n objects, minimised over d in {1, 2, n}; it
// returns the time and the degree.
func ThesisCost(n int, L time.Duration, B float64, S int64) (time.Duration, int) {
	best, bd := time.Duration(math.MaxInt64), 1
	for _, d := range thesisDegrees(n) {
		if t := plan.Cost(n, d, L, B, S); t < best {
			best, bd = t, d
		}
	}
	return best, bd
}

// FillCost is eq. 2.1 with the fill of a pipeline of chunks of c bytes,
// minimised over d in {1, 2, n}:
//
//	T(1) = (n-1)·L + S/B + (n-2)·c/B    a chain of n-1 hops
//	T(d) = h·L + d·S/B + (h-1)·d·c/B    h = ⌈log_d n⌉ levels
//
// The chain's first chunk crosses n-1 hops before its last byte can
// follow; in a tree each level waits for d chunks, one from each child
// over the node's one downlink. T(1) is the pipelined chain's curve.
func FillCost(n int, L time.Duration, B float64, S, c int64) (time.Duration, int) {
	l, sb, cb := L.Seconds(), float64(S)/B, float64(c)/B
	best, bd := math.Inf(1), 1
	for _, d := range thesisDegrees(n) {
		var t float64
		if d == 1 {
			t = float64(n-1)*l + sb + math.Max(float64(n-2), 0)*cb
		} else {
			h := math.Ceil(math.Log(float64(n))/math.Log(float64(d)) - 1e-9)
			t = h*l + float64(d)*sb + math.Max(h-1, 0)*float64(d)*cb
		}
		if t < best {
			best, bd = t, d
		}
	}
	return time.Duration(best * float64(time.Second)), bd
}

// Analytic is system's modelled time for scenario on n hosts.
//
//	binomial tree (MPI):  ⌈log2 n⌉·(L + S/B), twice for AllReduce
//	pipelined chain:      S/B + (n-2)·c/B + (n-1)·L (a chain of n-1 hops
//	                      fills one chunk a hop); AllReduce chains a
//	                      reduce into a broadcast: 2n-3 hops, 2·S/B over
//	                      a middle host's links
//	ring (Gloo, MPI's large messages): 2(n-1)/n·S/B + 2(n-1)·L
//	                      (broadcast and reduce as scatter/reduce-scatter
//	                      plus (all)gather)
//	thesis T(d):          eq. 2.1 as published (ThesisCost); AllReduce
//	                      adds the broadcast, T(1) of n-1 receivers
//	T(d)+fill:            eq. 2.1 with the pipeline's fill (FillCost);
//	                      AllReduce adds the broadcast as a chain with
//	                      its fill
//
// A broadcast is priced as a reduce: the same tree, the bytes flowing the
// other way. For the notice and the barrier, only the binomial tree is
// drawn: the BMG's ⌈log2 n⌉ rounds of L plus a message's cost after the
// detection, and a flat barrier's n arrivals at one manager.
func Analytic(system, scenario string, n int, S int64, p Params) time.Duration {
	B := p.Bandwidth / 8 * p.PayloadEfficiency
	L := p.Latency.Seconds()
	sb := float64(S) / B
	chunk := int64(plan.ChunkForObject(B, S))
	c := float64(chunk) / B
	lg := math.Ceil(math.Log2(float64(n)))
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	switch scenario {
	case "notice":
		if system == SysBinomial {
			return p.Detect + secs(lg*(p.actorLatency().Seconds()+p.StoreCost.Seconds()))
		}
		return 0
	case "barrier":
		if system == SysBinomial {
			return secs(2*p.actorLatency().Seconds() + float64(n)*p.CoordCost.Seconds())
		}
		return 0
	}
	all := scenario == "allreduce"
	switch system {
	case SysBinomial:
		t := lg * (L + sb)
		if all {
			t *= 2
		}
		return secs(t)
	case SysChain:
		hops, xfer := float64(n-1), sb
		if all {
			// A middle host's downlink takes both the partial sum and the
			// result, its uplink sends both: 2·S/B.
			hops, xfer = float64(2*n-3), 2*sb
		}
		return secs(xfer + math.Max(hops-1, 0)*c + hops*L)
	case SysRing:
		return secs(2*float64(n-1)/float64(n)*sb + 2*float64(n-1)*L)
	case SysThesis:
		t, _ := ThesisCost(n, p.Latency, B, S)
		if all {
			t += plan.Cost(max(n-1, 1), 1, p.Latency, B, S)
		}
		return t
	case SysThesisFill:
		t, _ := FillCost(n, p.Latency, B, S, chunk)
		if all {
			b, _ := FillCost(n, p.Latency, B, S, chunk)
			t += b
		}
		return t
	}
	return 0
}

// Ideal is the scenario's ideal time, as hoplite bench computes it: S/B
// at the link's rate (B/8, not the payload rate), 2(n-1)/n·S/B for
// AllReduce; the notice's and the barrier's are the binomial model's.
func Ideal(scenario string, n int, S int64, p Params) time.Duration {
	sb := float64(S) / (p.Bandwidth / 8)
	switch scenario {
	case "allreduce":
		sb *= 2 * float64(n-1) / float64(n)
	case "notice", "barrier":
		return Analytic(SysBinomial, scenario, n, S, p)
	}
	return time.Duration(sb * float64(time.Second))
}
