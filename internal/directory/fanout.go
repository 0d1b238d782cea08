package directory

import "math"

// With TableConfig.FanOut k > 1 a copy streams to up to k receivers at
// once, and a receiver is handed the shallowest copy that has room: a
// broadcast whose N receivers ask together forms a tree of depth about
// log_k N instead of a chain of N-1 hops. Each hop of a pipelined chain
// adds a chunk's time before the last receiver's first byte, so a deep
// chain's fill dominates at scale (docs/simulator.md); but each of a
// sender's k streams takes 1/k of its uplink, so where the links bound a
// transfer, a tree takes about k·S/B where a chain takes S/B plus its
// fill. It pays where a receiver takes bytes in slower than its sender's
// uplink gives them (its CPU per byte, a slower downlink).

// fanOut is the table's per-copy stream limit (at least 1).
func (t *LocationTable) fanOut() int { return max(t.cfg.FanOut, 1) }

// senderLoad is what pickSender weighs a copy by under a fan-out: how
// many receivers it streams to, and its hops from a whole copy.
type senderLoad struct {
	serving map[string]int // sender -> receivers streaming from it now
	hops    map[string]int // copy -> hops up its fetchingFrom chain
}

// loadOf counts, for every copy of e, the receivers it feeds now (a
// naive fetch claims nothing, as in claim).
func loadOf(e *entry) *senderLoad {
	l := &senderLoad{serving: make(map[string]int, len(e.locs)), hops: make(map[string]int, len(e.locs))}
	for _, loc := range e.locs {
		if loc.fetchingFrom != "" && !loc.naive {
			l.serving[loc.fetchingFrom]++
		}
	}
	return l
}

// depth is loc's hops up its chain of senders to a copy that fetches
// from nobody (a whole copy, a creator's); a chain that leaves the table
// or loops stops counting there (upstreamContains refuses such a copy).
func (l *senderLoad) depth(e *entry, loc *location) int {
	id := loc.node.GetNodeId()
	if d, ok := l.hops[id]; ok {
		return d
	}
	d := 0
	for cur := loc; cur.fetchingFrom != "" && d <= len(e.locs); {
		up := e.locs[cur.fetchingFrom]
		if up == nil {
			d++
			break
		}
		if dd, ok := l.hops[up.node.GetNodeId()]; ok {
			d += dd + 1
			break
		}
		d, cur = d+1, up
	}
	l.hops[id] = d
	return d
}

// shallower orders the copies a fan-out offers: fewer hops from a whole
// copy first (the tree stays O(log N) deep), then the one streaming to
// fewer receivers (each of its streams gets a larger share of its
// uplink), then as better.
func (l *senderLoad) shallower(e *entry, a, b *location) bool {
	if da, db := l.depth(e, a), l.depth(e, b); da != db {
		return da < db
	}
	if sa, sb := l.serving[a.node.GetNodeId()], l.serving[b.node.GetNodeId()]; sa != sb {
		return sa < sb
	}
	return better(a, b)
}

// hasRoom reports whether loc may take another receiver: it streams to
// fewer than the fan-out.
func (l *senderLoad) hasRoom(loc *location, fanOut int) bool {
	return l.serving[loc.node.GetNodeId()] < fanOut
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
