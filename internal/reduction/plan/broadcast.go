package plan

import (
	"math"
	"time"
)

// MaxBroadcastFanOut bounds the fan-out ChooseBroadcastFanOut considers:
// past it a sender's share of its uplink is so thin that no receiver's
// intake is slower on any link the model is fed.
const MaxBroadcastFanOut = 8

// BroadcastTime models a receiver-driven broadcast of an S-byte object
// to n receivers that ask together, when each copy streams to at most k
// of them at once (the directory's fan-out): the receivers form a tree
// of k children a copy, as deep as h levels, and every stream runs at
//
//	r = min(B/k, intake)
//
// (a sender's uplink B shared by k streams, no faster than a receiver
// takes bytes in: its CPU per byte or its downlink; intake <= 0 means
// the link bounds it). A pipelined stream forwards a chunk c as it takes
// it in, so the deepest receiver's last byte comes
//
//	T = S/r + L + (h-1)·(max((c-burst)/(B/k), c/cpu) + L)
//
// after the first: the transfer once, and a chunk's time and a latency
// for every hop below the first (the fill). A link's burst, which an
// idle link passes at once, spares a hop's first chunk the link's time
// but not its receiver's CPU, which takes the chunk in before it can
// relay it: on 10 Gbit/s links of 20 µs a chain's hop of 64 KiB chunks
// took about 100 µs in the simulator at 1,024 hosts, where the burst
// alone would price it at the latency, 20 µs, and the chain was chosen
// over a tree 1.6 times as fast. A chain (k = 1) is n deep;
// a tree of k > 1 is ⌈log_k⌉ of its size deep. c is the chunk the
// directory hands the receivers for that depth (BroadcastChunk), or
// link.Chunk. An unknown bandwidth (B <= 0, NaN, +Inf) costs forever alike for every k.
func BroadcastTime(n, k int, link BroadcastLink, S int64) time.Duration {
	n, k = max(n, 1), max(k, 1)
	B := link.B
	if !(B > 0) || math.IsInf(B, 1) {
		return time.Duration(math.MaxInt64)
	}
	r := B / float64(k)
	if link.Intake > 0 && !math.IsInf(link.Intake, 1) {
		r = min(r, link.Intake)
	}
	c := int64(BroadcastChunk(n, k, B, S))
	if link.Chunk > 0 {
		c = link.Chunk
	}
	c = min(c, max(S, 0))
	hop := transferNanos(r, c) // a hop's first chunk, at r
	if link.Burst > 0 {
		wait := max(c-int64(min(link.Burst, float64(c))), 0)
		hop = transferNanos(B/float64(k), wait)
		if link.CPU > 0 && !math.IsInf(link.CPU, 1) {
			hop = max(hop, transferNanos(link.CPU, c))
		}
	}
	h := broadcastDepth(n, k)
	lat := max(float64(link.L), 0)
	return saturate(transferNanos(r, S) + lat + float64(h-1)*(hop+lat))
}

// BroadcastFillShare is how much of an object's own transfer time the
// fill of its broadcast tree may cost: BroadcastChunk halves the chunk
// until the depth's chunks take no more than this share of the object.
const BroadcastFillShare = 1.0 / 16

// BroadcastChunk is the chunk a broadcast of an S-byte object to n
// receivers, k to a copy, moves in: ChunkForObject(B, S), halved (down
// to PipelineFloor(B)) while the tree's depth h below its first hop, each hop
// waiting for a chunk, would make the fill (h-1)·c more than
// BroadcastFillShare of S. A chunk right for one stream on one link
// (about 5 ms of it) makes a deep tree pay that 5 ms at every level: a
// chain of 255 hops of 256 KiB chunks at 400 Mbit/s fills for longer
// than the object takes to cross a link. A shallow tree keeps
// ChunkForObject's chunk (fewer chunks, less each costs a member).
func BroadcastChunk(n, k int, B float64, S int64) int {
	c := ChunkForObject(B, S)
	if S <= 0 {
		return c
	}
	hops := int64(broadcastDepth(max(n, 1), max(k, 1)) - 1)
	floor := PipelineFloor(int(hops), B)
	for c > floor && float64(hops)*float64(c) > float64(S)*BroadcastFillShare {
		c /= 2
	}
	return c
}

// BroadcastLink is the network a broadcast's cost is priced on.
type BroadcastLink struct {
	// L is a chunk's one-way latency between two members.
	L time.Duration
	// B is a member's uplink, in payload bytes per second.
	B float64
	// Intake is the rate at which a receiver takes a stream's bytes in
	// (its CPU per byte, its downlink); 0: no slower than B.
	Intake float64
	// Burst is how many bytes a link that idled passes at once before
	// its rate holds it back (a token bucket's burst, as a tc shaper's);
	// a hop's first chunk waits for the rest only. 0: none.
	Burst float64
	// CPU is the rate at which a receiver's CPU takes bytes in, whatever
	// its links: a hop's first chunk costs it that long even where the
	// burst passes the chunk at once. 0: not known, not charged.
	CPU float64
	// Chunk, if > 0, is the chunk the streams move in whatever the
	// tree's depth (receivers that choose their own); 0: BroadcastChunk.
	Chunk int64
}

// broadcastDepth is how many levels n receivers fill below their first
// sender when each copy serves k of them: n for a chain, else the least
// h with k + k² + … + k^h >= n.
func broadcastDepth(n, k int) int {
	if k <= 1 {
		return n
	}
	h, level, total := 0, 1, 0
	for total < n {
		h++
		level *= k
		total += level
	}
	return h
}

// ChooseBroadcastFanOut is the fan-out in 1..min(n, MaxBroadcastFanOut)
// that BroadcastTime prices lowest for n receivers (ties to the smaller,
// whose copies upload less). A chain's fill grows with n while a tree's
// grows with log n, but each stream of a tree gets 1/k of its sender's
// uplink: where the links bound a transfer (intake >= B) a small
// broadcast stays a chain, and a large one becomes a tree once the
// chain's fill costs more than the transfer it loses; where a receiver
// takes bytes in slower than an uplink gives them (its CPU per byte on
// fast links), fan-out up to B/intake costs nothing and is chosen at any
// n > 1. An unknown bandwidth gives 1, the chain.
func ChooseBroadcastFanOut(n int, link BroadcastLink, S int64) int {
	n = max(n, 1)
	best, bestT := 1, BroadcastTime(n, 1, link, S)
	if bestT == time.Duration(math.MaxInt64) {
		return 1
	}
	for k := 2; k <= min(n, MaxBroadcastFanOut); k++ {
		if t := BroadcastTime(n, k, link, S); t < bestT {
			best, bestT = k, t
		}
	}
	return best
}
