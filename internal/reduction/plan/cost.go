package plan

import (
	"math"
	"time"
)

// Cost is the thesis' model (eq. 2.1) of the time to reduce n objects of
// S bytes with a tree of degree d, given latency L and bandwidth B in
// bytes per second:
//
//	T(1) = n·L + S/B            (a chain: pipelining pays S/B once)
//	T(d) = L·log_d(n) + d·S/B   (d > 1; d == n is the flat gather)
//
// log_d(n) is kept continuous as in the thesis rather than rounded up to
// the real tree height, so the choice matches the published model.
// Inputs the model cannot price are treated conservatively instead of
// producing NaN or Inf: n < 1 counts as 1, d < 1 as 1, negative L or S
// as 0; B <= 0 or NaN means no bandwidth, so any S > 0 takes forever;
// S == 0 costs no transfer time whatever B is. The result saturates at
// the largest Duration.
func Cost(n, d int, L time.Duration, B float64, S int64) time.Duration {
	n, d = max(n, 1), max(d, 1)
	lat := max(float64(L), 0) // nanoseconds
	xfer := transferNanos(B, S)
	var total float64
	if d == 1 {
		total = float64(n)*lat + xfer
	} else {
		total = lat*logBase(n, d) + float64(d)*xfer
	}
	return saturate(total)
}

// transferNanos is S/B in nanoseconds, +Inf when B cannot carry S.
func transferNanos(B float64, S int64) float64 {
	if S <= 0 {
		return 0
	}
	if !(B > 0) { // also catches NaN
		return math.Inf(1)
	}
	return float64(S) / B * float64(time.Second)
}

// logBase returns log_d(n), exact for integer powers so that hand-checked
// costs do not drift by a nanosecond through floating-point rounding.
func logBase(n, d int) float64 {
	k, p := 0, 1
	for p < n && p <= n/d {
		p *= d
		k++
	}
	if p == n {
		return float64(k)
	}
	return math.Log(float64(n)) / math.Log(float64(d))
}

func saturate(nanos float64) time.Duration {
	if math.IsNaN(nanos) || nanos >= float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(nanos))
}

// Fill is what a pipeline of chunks adds to Cost for a tree of degree d
// over n objects of S bytes: before a path's last byte can follow its
// first, the first chunk c crosses every hop, and a node of degree d
// waits for one chunk from each of its children over its one downlink.
//
//	Fill(1) = (n-2)·c/B         a chain of n-1 hops
//	Fill(d) = (h-1)·d·c/B       h = ⌈log_d n⌉ levels (d > 1)
//
// c is the chunk the tree moves its partial results in (ReduceChunk, at
// most S). Eq. 2.1 leaves it out: a chain pays S/B once whatever its
// length, which holds while (n-2)·c is small beside S; that is what
// ReduceChunk keeps it to, down to PipelineFloor (at 1,024 hosts of 32 MiB on
// 400 Mbit/s a chain in the link's chunk would fill for five times its
// S/B, in 64 KiB chunks for about twice). An unknown bandwidth (B <= 0
// or NaN) adds nothing: Cost is forever already.
func Fill(n, d int, B float64, S int64) time.Duration {
	return FillShaped(n, d, B, Shaper{}, S)
}

// Shaper is a link's token bucket as the cost model sees it (a tc tbf
// shaper's, as the testbed's): Rate, the link's payload rate in bytes
// per second, and Burst, the bytes it passes at once after it idled. The
// zero Shaper is none: every byte waits for the rate.
type Shaper struct{ Rate, Burst float64 }

// credit is how many bytes of a tree level's first chunks the shaper
// passes at once for a model whose bandwidth is B: its Burst where the
// link bounds B (B within a tenth of Rate), none where something slower
// does (a host's CPU per byte: a chunk then waits for the CPU however
// early its bytes came).
func (s Shaper) credit(B float64) float64 {
	if !(s.Burst > 0) || !(s.Rate > 0) || !(B > 0) || B < 0.9*s.Rate {
		return 0
	}
	return s.Burst
}

// FillShaped is Fill on links shaped by sh: each level's first chunks (a
// chain's one, a tree node's d, one from each child) cross a link that
// idled until then, which passes sh's burst of them at once (credit), so
// a level waits for the rest at B. A chain of 64 KiB chunks behind the
// testbed's 200 KB burst fills for its latencies alone: at 1,024
// simulated hosts of 32 MiB its reduce took 1.08 s where the tree of
// degree 2 that Fill's 1.4 ms a hop chose took 1.61 s.
func FillShaped(n, d int, B float64, sh Shaper, S int64) time.Duration {
	n, d = max(n, 1), max(d, 1)
	if !(B > 0) || math.IsInf(B, 1) || S <= 0 || n <= 2 {
		return 0
	}
	c := float64(min(int64(ReduceChunk(n, d, B, S)), S))
	perLevel := 1.0 // a chain's level is a hop: one chunk
	if d > 1 {
		perLevel = float64(d)
	}
	levels := fillHops(n, d) / perLevel
	wait := max(perLevel*c-sh.credit(B), 0)
	return saturate(levels * transferNanos(B, int64(wait)))
}

// fillHops is how many chunks a tree of degree d over n objects waits
// for before its last byte can follow its first: n-2 for a chain,
// (h-1)·d for a tree of h = ⌈log_d n⌉ levels.
func fillHops(n, d int) float64 {
	if n <= 2 {
		return 0
	}
	if d <= 1 {
		return float64(n - 2)
	}
	h := 0
	for p := 1; p < n; p *= d {
		h++
	}
	return float64((h - 1) * d)
}

// ReduceChunk is the chunk a reduce tree of degree d over n objects of
// S bytes moves its partial results in: ChunkForObject(B, S), halved
// (down to PipelineFloor(B)) while the tree's fill, fillHops chunks, would be
// more than BroadcastFillShare of S. As for a broadcast's tree
// (BroadcastChunk): a chunk right for one stream on one link (about 5
// ms of it) makes a deep chain pay those 5 ms at every hop, and the cost
// model then leaves the chain, which takes in S a member, for a tree
// whose interior members take in d·S. A shallow tree keeps the link's
// chunk.
func ReduceChunk(n, d int, B float64, S int64) int {
	c := ChunkForObject(B, S)
	if S <= 0 {
		return c
	}
	hops := fillHops(max(n, 1), max(d, 1))
	floor := PipelineFloor(int(hops), B)
	for c > floor && hops*float64(c) > float64(S)*BroadcastFillShare {
		c /= 2
	}
	return c
}

// ChooseDegree returns the degree in 1..min(n, maxD) that minimises Cost
// plus the pipeline's Fill, and the cost of every degree it evaluated so
// that callers can log why.
// Ties go to the smaller degree, which moves fewer bytes into each node.
// n < 1 and maxD < 1 count as 1, so there is always an answer. An unknown
// bandwidth (B <= 0) makes every degree cost forever alike: the answer is
// the chain, d = 1, whatever L is.
func ChooseDegree(n int, L time.Duration, B float64, S int64, maxD int) (d int, costs map[int]time.Duration) {
	return ChooseDegreeShaped(n, L, B, Shaper{}, S, maxD)
}

// ChooseDegreeShaped is ChooseDegree on links shaped by sh (FillShaped).
func ChooseDegreeShaped(n int, L time.Duration, B float64, sh Shaper, S int64, maxD int) (d int, costs map[int]time.Duration) {
	n, maxD = max(n, 1), max(maxD, 1)
	top := min(n, maxD)
	costs = make(map[int]time.Duration, top)
	d = 1
	for k := 1; k <= top; k++ {
		costs[k] = Cost(n, k, L, B, S) + FillShaped(n, k, B, sh, S)
		if costs[k] < costs[d] {
			d = k
		}
	}
	return d, costs
}

// ChainLength is the chain length the published code used for
// NewChainLeafTree: about S/(B·L), the number of hops whose added latency
// costs as much as one more transfer of the object, clamped to [1, n]. A
// zero latency or no bandwidth makes hops free relative to transfers, so
// the whole reduce becomes one chain; n < 1 counts as 1.
func ChainLength(n int, L time.Duration, B float64, S int64) int {
	n = max(n, 1)
	if S <= 0 || B > math.MaxFloat64 {
		return 1
	}
	if L <= 0 || !(B > 0) {
		return n
	}
	k := math.Round(float64(S) / (B * L.Seconds()))
	if !(k < float64(n)) {
		return n
	}
	return max(int(k), 1)
}

// PipelineFloor is the least chunk ReduceChunk and BroadcastChunk halve
// the chunk of a pipeline that waits for hops chunks to fill (a chain's
// n-2) to, on links of B payload bytes per second: MinChunk, or, for a
// pipeline of DeepPipelineHops or more, down to MinPipelineChunk as long
// as a chunk still takes ChunkCPUTimes its ChunkCPU on the link, so
// that its members keep up with it. An unknown B keeps MinChunk.
//
// Every hop of a chain waits for a chunk, and its members' CPU for each
// chunk's bytes: at 1,024 simulated hosts of 32 MiB on the testbed's
// links (400 Mbit/s, a core a host), a reduce by a chain took 0.952 s in
// 64 KiB chunks and 0.840 s in 16 KiB ones, a broadcast 0.929 and
// 0.832 s, with ChunkCPU charged. A shallow pipeline saves little fill
// and pays every chunk's CPU on every member: 32 testbed members on two
// cores (50 Mbit/s, 1 MiB) broadcast in 16 KiB chunks with 17 % more CPU
// an operation, and 8 KiB chunks made both the reduce and the broadcast
// slower. On 10 Gbit/s links a 64 KiB chunk takes 52 µs, under
// ChunkCPUTimes·ChunkCPU, and MinChunk stays at any depth.
func PipelineFloor(hops int, B float64) int {
	c := MinChunk
	if hops < DeepPipelineHops || !(B > 0) || math.IsInf(B, 0) {
		return c
	}
	for c/2 >= MinPipelineChunk && float64(c/2)/B >= ChunkCPUTimes*ChunkCPU.Seconds() {
		c /= 2
	}
	return c
}

// DeepPipelineHops is the depth from which PipelineFloor lets a
// pipeline's chunk go under MinChunk. In the simulator (32 MiB, testbed
// links, a core a host) 16 KiB chunks at any depth shortened reduces and
// broadcasts by 0.5 % at 64 hosts, 2 % at 128, 3.6 % at 256 and 6 % at
// 512; under 128 hops that gain is smaller than what the chunks' CPU
// cost on the testbed's shared cores (see PipelineFloor).
const DeepPipelineHops = 128

// ChunkCPU is what one chunk of a stream costs its sender and its
// receiver together beside its bytes, for chunks under MinChunk: each is
// a frame written and read and, on a link that holds it back, a wake-up
// at both ends. BenchmarkChunkCPU (internal/member) fetched 32 MiB
// between two members on the TCP data plane in fixed chunks, medians of
// 5 on the 2-vCPU AMD EPYC VM, 2026-11-29: 81.6, 63.0, 41.3 and 33.5 ms
// of CPU in 8, 16, 32 and 64 KiB chunks, 13.4, 19.2 and 15.2 µs a chunk
// more than in 64 KiB ones.
const ChunkCPU = 15 * time.Microsecond

// ChunkCPUTimes is how many times its ChunkCPU a chunk under MinChunk
// must take on the link (PipelineFloor): with the per-byte CPU besides,
// its members then spend well under the chunk's time on it.
const ChunkCPUTimes = 8

// MinPipelineChunk is the least chunk PipelineFloor goes to. Under it a
// chunk's own CPU nears what it saves a hop even on slow links: 8 KiB
// chunks cost 2.4 times the CPU of 64 KiB ones per 32 MiB moved.
const MinPipelineChunk = 16 << 10

// Chunk sizes ChunkFor chooses between.
const (
	MinChunk = 64 << 10
	MaxChunk = 4 << 20
	// chunkTime is how long one chunk should take on the link. Every hop
	// of a pipelined chain (a broadcast tree's depth, a chain reduce, the
	// broadcast of an AllReduce behind its reduce) adds one chunk's
	// transfer before the next hop can start, so a chunk much longer than
	// this makes the pipeline fill dominate: on a 400 Mbit/s testbed 1 MiB
	// chunks cost 21 ms a hop, and an 8-node AllReduce took 2.0 s instead
	// of 1.6 s with 256 KiB. Much shorter chunks cost per-chunk overhead
	// on fast links.
	chunkTime = 5 * time.Millisecond
)

// UnmeasuredChunk is the chunk of a member that has measured no bandwidth
// yet: a 400 Mbit/s link's. Each hop of a pipelined broadcast or chain
// pays a chunk's time of fill, so 1 MiB chunks on such a link cost a new
// cluster's first 32 MiB broadcast to 8 about a tenth of its time
// (docs/benchmarks.md). A fast link measures B in its first transfer and
// moves to larger chunks.
const UnmeasuredChunk = 256 << 10

// MinChunksPerObject is how many chunks ChunkForObject keeps an object in
// at least (down to MinChunk): a pipelined chain of n hops takes about
// S/B + (n-1)·chunk/B, so with 4 chunks a 1 MiB object on an 8-host chain
// paid 7 chunk times of fill for 4 of transfer (a reduce of 85 ms where
// MPI's pipeline takes 39 ms).
const MinChunksPerObject = 16

// ChunkForObject is ChunkFor(B), halved while the S-byte object would
// have fewer than MinChunksPerObject chunks and the chunk is above
// MinChunk (S <= 0, a size not known yet, leaves ChunkFor(B)).
func ChunkForObject(B float64, S int64) int {
	c := ChunkFor(B)
	if S <= 0 { // size unknown: the bandwidth's chunk
		return c
	}
	for c > MinChunk && int64(c)*MinChunksPerObject > S {
		c /= 2
	}
	return c
}

// ChunkFor is the transfer chunk for bandwidth B (bytes per second): the
// power of two nearest to B·5 ms, clamped to [MinChunk, MaxChunk] (256 KiB
// at 400 Mbit/s, 4 MiB from about 7 Gbit/s up). B <= 0 or NaN, nothing
// measured, gives UnmeasuredChunk.
func ChunkFor(B float64) int {
	if !(B > 0) || math.IsInf(B, 0) {
		if math.IsInf(B, 1) {
			return MaxChunk
		}
		return UnmeasuredChunk
	}
	want := B * chunkTime.Seconds()
	c := MinChunk
	for c < MaxChunk && float64(2*c) <= want*math.Sqrt2 {
		c *= 2
	}
	return c
}
