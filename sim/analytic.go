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

// Analytic is system's modelled time for scenario on n hosts, charged
// the CPU the simulated cores pay (peerCPU: the same per byte, per chunk
// message and per operation), so that a curve is one a real system on
// these hosts could meet:
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
// where S/B is S at the slower of the link and the host's CPU per byte,
// a chunk's fill pays both, and L a hop's CPU for its message besides
// the link's latency. A broadcast is priced as a reduce: the same tree,
// the bytes flowing the other way. For the notice and the barrier, only
// the binomial tree is drawn: the BMG's ⌈log2 n⌉ rounds of L plus a
// message's cost after the detection, and a flat barrier's n arrivals
// at one manager.
func Analytic(system, scenario string, n int, S int64, p Params) time.Duration {
	B := p.Bandwidth / 8 * p.PayloadEfficiency
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
	chunk := int64(plan.ChunkForObject(B, S))
	cpu := peerCPU(p, B, chunk)
	L := p.Latency.Seconds() + cpu.msg
	fs := float64(S)
	// The stream of the collective's first half: a reduce's combines,
	// a broadcast's copies; an AllReduce's second half is a broadcast.
	first := cpu.copy
	if scenario != "broadcast" {
		first = cpu.combine
	}
	var t float64
	switch system {
	case SysBinomial:
		t = lg * (L + fs*first.perByte)
		if scenario == "allreduce" {
			t += lg * (L + fs*cpu.copy.perByte)
		}
	case SysChain:
		hops := float64(n - 1)
		t = fs*first.perByte + math.Max(hops-1, 0)*first.fill + hops*L
		if scenario == "allreduce" {
			// A middle host's downlink takes both the partial sum and the
			// result, its uplink sends both: 2·S/B over 2n-3 hops.
			hops = float64(2*n - 3)
			t = fs*(first.perByte+cpu.copy.perByte) + math.Max(hops-1, 0)*(first.fill+cpu.copy.fill)/2 + hops*L
		}
	case SysRing:
		part := float64(n-1) / float64(n) * fs
		t = part*(first.perByte+cpu.copy.perByte) + 2*float64(n-1)*L
	case SysThesis:
		d, _ := ThesisCost(n, secs(L), 1/first.perByte, S)
		t = d.Seconds()
		if scenario == "allreduce" {
			t += plan.Cost(max(n-1, 1), 1, secs(L), 1/cpu.copy.perByte, S).Seconds()
		}
	case SysThesisFill:
		d, _ := FillCost(n, secs(L), 1/first.perByte, S, chunk)
		t = d.Seconds()
		if scenario == "allreduce" {
			b, _ := FillCost(n, secs(L), 1/cpu.copy.perByte, S, chunk)
			t += b.Seconds()
		}
	default:
		return 0
	}
	t += p.OperationCPU.Seconds()
	if p.CPUs > 0 {
		// Shared cores: every byte each host takes in, and each host's
		// part in the operation, on CPUs cores at most.
		total := float64(n-1)*fs*(first.perByteCPU) + float64(n)*p.OperationCPU.Seconds()
		if scenario == "allreduce" {
			total += float64(n-1) * fs * cpu.copy.perByteCPU
		}
		t = math.Max(t, total/float64(p.CPUs))
	}
	return secs(t)
}

// streamCPU is what a stream of bytes costs a host on the peers' curves.
type streamCPU struct {
	perByteCPU float64 // its CPU per byte taken in
	perByte    float64 // seconds a byte: the slower of the link and the CPU
	fill       float64 // seconds a chunk takes to cross a hop: the link's, then the CPU's
}

// peerStreams is the CPU the peers' curves pay: a copy's bytes (ByteCost
// each) and a reduce's (ReduceCost more each), and msg, each chunk
// message's CPU at its sender and its receiver (RequestCPU).
type peerStreams struct {
	copy, combine streamCPU
	msg           float64
}

// peerCPU charges the peers the simulated cores' CPU on links of B
// payload bytes a second, in chunks of chunk bytes.
func peerCPU(p Params, B float64, chunk int64) peerStreams {
	stream := func(cpu float64) streamCPU {
		return streamCPU{perByteCPU: cpu, perByte: math.Max(1/B, cpu), fill: float64(chunk) * (1/B + cpu)}
	}
	return peerStreams{copy: stream(p.ByteCost), combine: stream(p.ByteCost + p.ReduceCost), msg: 2 * p.RequestCPU.Seconds()}
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
