package directory

import (
	"math"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// With a fan-out k > 1 a copy streams to up to k receivers at
// once, and a receiver is handed the shallowest copy that has room: a
// broadcast whose N receivers ask together forms a tree of depth about
// log_k N instead of a chain of N-1 hops. Each hop of a pipelined chain
// adds a chunk's time before the last receiver's first byte, so a deep
// chain's fill dominates at scale (docs/simulator.md); but each of a
// sender's k streams takes 1/k of its uplink, so where the links bound a
// transfer, a tree takes about k·S/B where a chain takes S/B plus its
// fill. It pays where a receiver takes bytes in slower than its sender's
// uplink gives them (its CPU per byte, a slower downlink), or where a
// chain's fill, a chunk's time for each of N hops, outgrows the object's
// own transfer. TableConfig.FanOut fixes k; FanOutAuto has the table
// choose it for each Locate by the cost model (fanOut, plan.BroadcastTime).

// FanOutAuto is the TableConfig.FanOut that has the table choose each
// Locate's fan-out by the cost model (fanOut).
const FanOutAuto = -1

// DefaultBroadcastLatency is TableConfig.Latency when not set: a chunk's
// one-way latency between two members of one rack (the testbed's veth
// pairs measure about this).
const DefaultBroadcastLatency = 50 * time.Microsecond

// fanOut is the per-copy stream limit for a Locate of e (at least 1):
// TableConfig.FanOut, or under FanOutAuto the cost model's choice for the
// receivers expected. A broadcast's receivers ask one after another, and
// a choice made for the few that asked first cannot be undone once the
// chain they formed is deep: so the receivers expected
// (TableConfig.Receivers, a cluster's members) count, not only those the
// object has now. Small broadcasts stay chains, which upload each byte
// once and pay a chunk's time a hop; large ones become trees of about
// log_k N levels, each of whose streams gets a k-th of its sender's
// uplink.
func (t *LocationTable) fanOut(e *entry) int {
	if t.cfg.FanOut != FanOutAuto {
		return max(t.cfg.FanOut, 1)
	}
	return plan.ChooseBroadcastFanOut(t.expectedReceivers(e), t.broadcastLink(), e.size)
}

// expectedReceivers is how many receivers the cost model prices a
// broadcast of e for: those it has (waiting or fetching), or
// TableConfig.Receivers if more.
func (t *LocationTable) expectedReceivers(e *entry) int {
	n := len(e.waiters) // the receiver asking is one (serveWaiters)
	if n+len(e.locs) <= t.cfg.Receivers {
		// Fewer than expected however many copies fetch: no need to
		// count them (a scan of every copy, twice a Locate, was a third
		// of a Locate's cost at 1,024 receivers: BenchmarkLocateBroadcast).
		return t.cfg.Receivers
	}
	for _, loc := range e.locs {
		if loc.fetchingFrom != "" {
			n++
		}
	}
	return max(n, t.cfg.Receivers)
}

// broadcastLink is the network a broadcast is priced on. A Reduce's
// target (an AllReduce's result) is priced and chunked as any object:
// its broadcast streams while the reduce that makes it still does, over
// the same uplinks, and with both in the chunk for their depth a
// reduce-then-broadcast of 32 MiB took 1.49 s at 256 simulated hosts on
// the testbed's links where, in the link's chunk, it took 2.01 s (the
// reduce a chain: 1.42 against 1.50 s at 32 hosts, 1.59 against 2.97 s
// at 512).
func (t *LocationTable) broadcastLink() plan.BroadcastLink {
	return plan.BroadcastLink{L: t.cfg.Latency, B: t.cfg.InlineUplink, Intake: t.cfg.Intake, Burst: t.cfg.Burst, CPU: t.cfg.CPU}
}

// streamChunk is the chunk a receiver handed a sender for e is told to
// move in (LocateReply.chunk): under FanOutAuto, plan.BroadcastChunk for
// the tree the receivers expected form, whose every level waits for a
// chunk, so a deep tree moves in small chunks and a shallow one in the
// link's; 0 (the receiver's own choice) under a fixed fan-out, for an
// object of unknown size, or when the table knows no uplink.
func (t *LocationTable) streamChunk(e *entry) int64 {
	if t.cfg.FanOut != FanOutAuto || e.size <= 0 || !(t.cfg.InlineUplink > 0) {
		return 0
	}
	n := t.expectedReceivers(e)
	k := plan.ChooseBroadcastFanOut(n, t.broadcastLink(), e.size)
	return int64(plan.BroadcastChunk(n, k, t.cfg.InlineUplink, e.size))
}

// fanScratch is what pickShallowest builds for one Locate, reused: a
// shard answers every Locate of a broadcast with a scan of the object's
// copies.
type fanScratch struct {
	serving map[string]int    // copy -> receivers it streams to now
	hops    map[*location]int // copy -> hops from a copy fed by nobody
	path    []*location
}

// pickShallowest is pickSender under a fan-out of k: the copy fewest
// hops from a whole one that streams to fewer than k receivers (the tree
// stays about log_k N deep), of those the one streaming to fewest (each
// stream gets a larger share of its uplink), then as better.
func (t *LocationTable) pickShallowest(e *entry, receiver, avoid string, k int) *location {
	if t.fan == nil {
		t.fan = &fanScratch{serving: map[string]int{}, hops: map[*location]int{}}
	}
	f := t.fan
	defer func() {
		clear(f.serving)
		clear(f.hops)
		clear(f.path)
		f.path = f.path[:0]
	}()
	for _, loc := range e.locs {
		if loc.fetchingFrom != "" && !loc.chosen { // a chosen fetch claims nothing (claim)
			f.serving[loc.fetchingFrom]++
		}
	}
	var best *location
	bestDepth, bestServing := 0, 0
	for id, loc := range e.locs {
		n := f.serving[id]
		if id == receiver || id == avoid || n >= k || loc.chosen || loc.unoffered || loc.unfed() {
			continue
		}
		d := f.depth(e, loc)
		if best != nil && (d > bestDepth || d == bestDepth && (n > bestServing || n == bestServing && !better(loc, best))) {
			continue
		}
		// The cycle check last: only a copy that would be chosen walks
		// its chain for it.
		if !t.upstreamContains(e, loc, receiver) {
			best, bestDepth, bestServing = loc, d, n
		}
	}
	return best
}

// depth is loc's hops up its chain of senders to a copy that fetches
// from nobody (a whole copy, a creator's); a chain that leaves the table
// or loops stops counting there (upstreamContains refuses such a copy).
// Every copy on the way is remembered, so a scan walks each link once.
func (f *fanScratch) depth(e *entry, loc *location) int {
	f.path = f.path[:0]
	d := 0
	for cur := loc; ; {
		if h, ok := f.hops[cur]; ok {
			d = h
			break
		}
		f.path = append(f.path, cur)
		if cur.fetchingFrom == "" || len(f.path) > len(e.locs) {
			d = -1 // the top of the path is 0 hops deep
			break
		}
		up := e.locs[cur.fetchingFrom]
		if up == nil {
			d = 0 // counted as a hop to a copy that left
			break
		}
		cur = up
	}
	for i := len(f.path) - 1; i >= 0; i-- {
		d++
		f.hops[f.path[i]] = d
	}
	return d
}

// FanOutFor is the fan-out that keeps a sender's uplink busy without
// slowing any receiver: how many receivers that each take bytes in at
// intake (bytes per second: a receiver's CPU per byte, or its downlink)
// one uplink of uplink bytes per second feeds, at least 1. Where the
// link bounds a transfer (intake ≥ uplink) it is 1, a chain.
func FanOutFor(uplink, intake float64) int {
	if !(uplink > 0) || !(intake > 0) || math.IsInf(uplink, 0) || math.IsInf(intake, 0) {
		return 1
	}
	return max(1, int(min(uplink/intake, 1<<10)))
}
