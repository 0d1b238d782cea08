package plan

import (
	"time"
)

// Slice is one slice of a sliced AllReduce: bytes [Off, Off+Len) of
// every source and of the target.
type Slice struct {
	Off, Len int64
}

// Slices cuts an object of size bytes into n slices whose boundaries fall
// on width-byte elements, as even as whole elements allow: the first
// (size/width) mod n slices hold one element more. It returns nil when
// the cut is impossible: n < 1, width < 1, size not a multiple of width,
// or fewer elements than slices (a slice would be empty).
func Slices(size int64, n, width int) []Slice {
	if n < 1 || width < 1 || size < 0 || size%int64(width) != 0 {
		return nil
	}
	elems := size / int64(width)
	if elems < int64(n) {
		return nil
	}
	out := make([]Slice, n)
	var off int64
	for i := range out {
		e := elems / int64(n)
		if int64(i) < elems%int64(n) {
			e++
		}
		out[i] = Slice{Off: off, Len: e * int64(width)}
		off += out[i].Len
	}
	return out
}

// SlicedContention is how much longer the bytes of an unpaced sliced
// AllReduce take than the ring's bound 2(n-1)/n·S/B, per participant
// beyond two: every link carries n-1 chains' streams and n-1 gathers' at
// once, not one stream at a time as a ring's, and left to TCP the chains
// it serves last finish late (on the testbed, 8 hosts at 400 Mbit/s, 32
// MiB, medians of 5: the slices' roots finished between 0.88 and 1.84 s;
// the AllReduce took 1.81× the bound at n = 8 and 1.20× at n = 4, a fit
// of 0.135 and 0.10 a participant). It applies when the link rate is not
// known to the senders (cluster.MemberConfig.LinkRate), which cannot pace.
const SlicedContention = 0.12

// PacedSlicedContention is SlicedContention for streams paced by their
// senders at their link's rate (transport.EgressPacer), which share each
// link evenly: 8 testbed hosts took 1.12× the bound (1.318 s against
// 1.174 s; paced at 47.1 MB/s, 0.985 of the links' payload rate), 4 hosts
// 1.085× (a fit of 0.04 a participant; the model keeps 0.02, where the
// choice matters most).
const PacedSlicedContention = 0.02

// PacedSlicedContentionMax bounds the paced contention: it stops growing
// once every link carries many even streams. 16 testbed hosts took
// 1.116× the bound as 8 did 1.12× (32 MiB at 200 Mbit/s, medians of 5:
// 2.809 s against 2.517 s, 2026-11-28), fill included, which at 16 is
// 1.5 % of the bound: the bytes' share is 1.10. Priced at 0.02 a
// participant (1.28×), 16 hosts went to reduce-then-broadcast, 8 %
// slower there (3.040 s).
const PacedSlicedContentionMax = 0.10

// slicedFactor is 1 + contention·(n-2), at least 1, paced at most
// 1 + PacedSlicedContentionMax.
func slicedFactor(n int, paced bool) float64 {
	if paced {
		return 1 + min(PacedSlicedContention*float64(max(n-2, 0)), PacedSlicedContentionMax)
	}
	return 1 + SlicedContention*float64(max(n-2, 0))
}

// SlicedControlMessages is how many control messages a sliced AllReduce
// of n sources sends: its n² chain and relay positions report only
// failures (ReduceTask.quiet), so about 14 for each participant (the
// simulator, which runs the real coordinator and workers, counts 900 at
// n = 64 and 3,588 at 256). When every position reported its start and
// end, 4n² + 10n: 66,820 at 128.
func SlicedControlMessages(n int) int64 {
	return 14 * int64(n)
}

// CoordMessageCPU is the most CPU one control message costs the
// coordinator's member: across processes on the testbed the actor
// plane's 62 µs a message and the coordinator's own 20 µs
// (sim.DefaultParams). When every position reported, the coordinator's
// CPU outgrew the transfer past 64 sources: the simulator took 5.39 s
// for a sliced AllReduce of 32 MiB at 128 hosts (1.41 s for a ring),
// 80.7 µs a message.
const CoordMessageCPU = 82 * time.Microsecond

// SlicedTaskBytes is about how many bytes of tasks a sliced AllReduce's
// coordinator sends for each of its n² positions when it lists them (a
// chain link's task, its share of the relays' and of the gathers'
// inputs): about 400 with ids of 30 characters (1.6 MB at n = 64). They
// leave through the coordinator's uplink before the last participant
// can start: 26 MB, 0.55 s on the testbed's links, at 256 (the
// simulator's sliced AllReduce there took 0.49 s longer with them than
// without). It lists them for n of 2, where the participants share no
// ring, and when several sources share a node.
const SlicedTaskBytes = 400

// SlicedShareBytes is about how many bytes a participant's share of a
// sliced AllReduce around a ring costs (messages.SlicedRingShare, which
// its node expands to its 2n tasks): two node references and four ids,
// about 300 bytes between processes, whatever n.
const SlicedShareBytes = 300

// slicedTaskBytes is what a sliced AllReduce's tasks cost its
// coordinator's uplink: n shares when they form a ring (n > 2; the model
// takes every participant for a node of its own), else n² listed tasks.
func slicedTaskBytes(n int) int64 {
	if n > 2 {
		return int64(n) * SlicedShareBytes
	}
	return int64(n) * int64(n) * SlicedTaskBytes
}

// messageCPU is what the model charges a control message: CoordMessageCPU,
// or the measured one-way latency L if that is less. A message that
// arrives in under a microsecond (members in one process: L of 0.4 µs)
// cost about that, not the 82 µs of one between processes.
func messageCPU(L time.Duration) float64 {
	return float64(min(CoordMessageCPU, max(L, 0)))
}

// SlicedStreams is how many of a sliced AllReduce's streams leave (and
// reach) each of its n participants at once: n-1 chains' and n-1 relays'
// (or, gathered from the roots, gathers').
func SlicedStreams(n int) int { return max(2*(n-1), 1) }

// SlicedCost models a sliced AllReduce of n sources of S bytes: a
// reduce-scatter (slice i reduced by a pipelined chain over every
// participant, rooted on participant i) and an all-gather (every
// participant fetches the n-1 slices it did not reduce). Every
// participant sends and receives (n-1)/n·S in each phase, as in a ring,
// so, with the contention of its concurrent streams (SlicedContention,
// or PacedSlicedContention if paced),
//
//	T = 2(n-1)/n·S/B·(1 + contention·(n-2)) + (n-1)·c/B + (n+2)·L + 2n·m
//
// where c is the chunk a slice moves in (ChunkForObject of S/n, at most
// the slice; of B/SlicedStreams(n) if paced, each stream's share): a
// chain of n positions fills its pipeline one chunk per hop. Latency is
// charged as T(1) charges a chain, one L a link (n), plus one for the
// gathers' fetches and one for publishing the copies at the end. The
// tasks (n shares of SlicedShareBytes; n²·SlicedTaskBytes listed, for
// n = 2) cross the coordinator's uplink first; m is a control message's
// CPU at the coordinator, min(CoordMessageCPU, L), and 2n of them are on
// the critical path (SlicedCriticalMessages). The coordinator's CPU
// bounds T from below: T is at least SlicedControlMessages(n) messages
// of m. B <= 0 or NaN prices every byte as forever, as Cost does.
func SlicedCost(n int, L time.Duration, B float64, S int64, paced bool) time.Duration {
	n = max(n, 1)
	S = max(S, 0)
	slice := S / int64(n)
	share := B
	if paced {
		share = B / float64(SlicedStreams(n))
	}
	chunk := min(int64(ChunkForObject(share, slice)), slice)
	// (n-1)/n·S unrounded: a slice may be an element larger than S/n.
	xfer := transferNanos(B, S) * 2 * float64(n-1) / float64(n) * slicedFactor(n, paced)
	xfer += transferNanos(B, int64(n-1)*chunk)
	xfer += transferNanos(B, slicedTaskBytes(n))
	control := float64(SlicedControlMessages(n)) * messageCPU(L)
	critical := float64(SlicedCriticalMessages*n) * messageCPU(L)
	return saturate(max(xfer+float64(n+2)*max(float64(L), 0)+critical, control))
}

// SlicedCriticalMessages is how many of a sliced AllReduce's control
// messages a participant adds to its time, not hidden by its transfer:
// its share, which the coordinator sends one after another before the
// last participant can start, and its commit, one after another after
// the last gather. In the simulator (10 Gbit/s links, the CPU measured
// where links do not bound) the sliced shape took 2.7·n messages' CPU
// longer than its transfer's model at 64 participants and 2.1·n at 128
// with the testbed's CPU; unpriced, the model sliced 64 hosts, 14 %
// slower than reducing then broadcasting (82.5 against 72.3 ms).
const SlicedCriticalMessages = 2

// ReduceBroadcastCost models the AllReduce that reduces to one root and
// then broadcasts the target: the best tree of Cost and its Fill (degree
// 1..min(n, maxD), which ChooseDegree picks) plus the broadcast, a chain to the n-1
// other participants, Cost(n-1, 1) = (n-1)·L + S/B. The broadcast
// pipelines behind the reduce, but it shares the same links, so its
// bytes add up with the reduce's: 2·S/B over the busiest link for a chain.
// The sum is then ReduceBroadcastOverhead longer.
func ReduceBroadcastCost(n int, L time.Duration, B float64, S int64, maxD int) (time.Duration, int) {
	return ReduceBroadcastCostShaped(n, L, B, Shaper{}, S, maxD)
}

// ReduceBroadcastCostShaped is ReduceBroadcastCost on links shaped by sh:
// its reduce's fill is FillShaped's (ChooseDegreeShaped).
func ReduceBroadcastCostShaped(n int, L time.Duration, B float64, sh Shaper, S int64, maxD int) (time.Duration, int) {
	d, costs := ChooseDegreeShaped(n, L, B, sh, S, maxD)
	return saturate((float64(costs[d]) + float64(Cost(max(n-1, 1), 1, L, B, S))) * ReduceBroadcastOverhead), d
}

// ReduceBroadcastOverhead is how much longer reduce-then-broadcast takes
// than the sum of its two phases' models. On the testbed it took 1.02
// at 4 hosts, 1.08 at 8 (400 Mbit/s, 32 MiB), 1.06 and 1.08 at 16 (200
// Mbit/s, 32 and 64 MiB; 3.040 and 6.110 s). In the simulator on 10
// Gbit/s links, where a host's CPU takes bytes in slower than its link
// and the broadcast's chunks wait behind the reduce's for it, it took
// 1.19 times its reduce and its broadcast run alone, at 32 and 128
// hosts (0.196 against 0.089 + 0.076 s at 32). At 1.15 the model's
// choice is the faster shape in the simulator from 2 to 1,024 hosts on
// both link profiles but at 64 on the testbed's (sliced, 3 % slower);
// at 1.06 it took reduce-then-broadcast from 32 to 128 hosts on 10
// Gbit/s links, 6 to 20 % slower than the sliced shape.
const ReduceBroadcastOverhead = 1.15

// AllReduceChoice is the cost model's verdict between the two AllReduce
// shapes.
type AllReduceChoice struct {
	Sliced bool
	// SlicedCost and ReduceBroadcastCost are the two modelled times (at the
	// bandwidth given; see ChooseAllReduce for an unknown one).
	SlicedCost, ReduceBroadcastCost time.Duration
	// Degree is the reduce tree's degree the reduce-then-broadcast shape
	// would use.
	Degree int
}

// ChooseAllReduce picks the sliced shape when it is modelled faster than
// reduce-then-broadcast for n sources of S bytes of width-byte elements,
// and possible: n >= 2 and every slice holds at least one element. Ties
// go to reduce-then-broadcast, the shape that also serves late arrivals.
// paced says the sliced shape's streams are paced by their senders
// (PacedSlicedContention, else SlicedContention). With no bandwidth known
// (B <= 0 or NaN) both shapes are priced at one byte per second, which
// compares the bytes each moves over its busiest link (every byte then
// outweighs any latency): unpaced, the sliced shape moves 2(n-1)/n·S,
// slowed by its contention, a reduce then a broadcast about 2·S (sliced
// up to n = 4).
func ChooseAllReduce(n int, L time.Duration, B float64, S int64, width, maxD int, paced bool) AllReduceChoice {
	return ChooseAllReduceShaped(n, L, B, Shaper{}, S, width, maxD, paced)
}

// ChooseAllReduceShaped is ChooseAllReduce on links shaped by sh: the
// reduce-then-broadcast's reduce is priced with FillShaped. The sliced
// shape's is not: its 2(n-1) streams a participant keep every link busy,
// and a busy link's bucket does not refill.
func ChooseAllReduceShaped(n int, L time.Duration, B float64, sh Shaper, S int64, width, maxD int, paced bool) AllReduceChoice {
	if !(B > 0) {
		B = 1
	}
	rb, d := ReduceBroadcastCostShaped(n, L, B, sh, S, maxD)
	c := AllReduceChoice{ReduceBroadcastCost: rb, Degree: d}
	if n < 2 || Slices(S, n, width) == nil {
		return c
	}
	c.SlicedCost = SlicedCost(n, L, B, S, paced)
	c.Sliced = c.SlicedCost < rb
	return c
}
