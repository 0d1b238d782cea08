package sim

import (
	"math"
	"time"

	"github.com/hoplite-go/hoplite/coordinator/plan"
)

// Analytic systems: closed-form times of the peers' algorithms and of the
// thesis's cost model on the same links (B the payload rate, L, chunk c).
const (
	SysSim      = "ours"
	SysFailure  = "ours-failure"
	SysBinomial = "mpi-binomial"
	SysChain    = "pipelined-chain"
	SysRing     = "ring"
	SysThesis   = "thesis-T(d)"
)

// AnalyticSystems are the curves drawn beside the simulation.
var AnalyticSystems = []string{SysBinomial, SysChain, SysRing, SysThesis}

// Analytic is system's modelled time for scenario on n hosts.
//
//	binomial tree (MPI):  ⌈log2 n⌉·(L + S/B), twice for AllReduce
//	pipelined chain:      S/B + (n-2)·c/B + (n-1)·L (a chain of n-1 hops
//	                      fills one chunk a hop); AllReduce chains a
//	                      reduce into a broadcast: 2n-3 hops
//	ring (Gloo, MPI's large messages): 2(n-1)/n·S/B + 2(n-1)·L
//	                      (broadcast and reduce as scatter/reduce-scatter
//	                      plus (all)gather)
//	thesis T(d):          min over d of eq. 2.1 (plan.ChooseDegree);
//	                      AllReduce adds the broadcast, T(1) of n-1
//	                      (plan.ReduceBroadcastCost)
//
// For the notice and the barrier, only the binomial tree is drawn: the
// BMG's ⌈log2 n⌉ rounds of L plus a message's cost after the detection,
// and a flat barrier's n arrivals at one manager.
func Analytic(system, scenario string, n int, S int64, p Params) time.Duration {
	B := p.Bandwidth / 8 * p.PayloadEfficiency
	L := p.Latency.Seconds()
	sb := float64(S) / B
	c := float64(plan.ChunkForObject(B, S)) / B
	lg := math.Ceil(math.Log2(float64(n)))
	secs := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	switch scenario {
	case "notice":
		if system == SysBinomial {
			return p.Detect + secs(lg*(L+p.StoreCost.Seconds()))
		}
		return 0
	case "barrier":
		if system == SysBinomial {
			return secs(2*L + float64(n)*p.CoordCost.Seconds())
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
		hops := float64(n - 1)
		if all {
			hops = float64(2*n - 3)
		}
		return secs(sb + math.Max(hops-1, 0)*c + hops*L)
	case SysRing:
		return secs(2*float64(n-1)/float64(n)*sb + 2*float64(n-1)*L)
	case SysThesis:
		if all {
			t, _ := plan.ReduceBroadcastCost(n, p.Latency, B, S, n)
			return t
		}
		d, costs := plan.ChooseDegree(n, p.Latency, B, S, n)
		return costs[d]
	}
	return 0
}
