package sim

import (
	"math"
	"time"
)

// link is one direction of a host's network attachment: its uplink
// (everything it sends) or its downlink (everything it receives). Flows
// crossing it share its capacity max-min fairly.
type link struct {
	cap   float64 // bytes per second
	flows []*flow
	// A token bucket of burst bytes, as the testbed's tbf shaper has: it
	// fills at cap while the link carries nothing, and a chunk that starts
	// takes what it holds at once (a shaped link idle for a while passes
	// its first bytes at the speed of the wire underneath).
	burst, tokens float64
	idleSince     time.Duration
	// scratch for rebalance
	mark int64
	rem  float64
	cnt  int
}

// flow is one stream's bytes in transit from a sender's uplink to a
// receiver's downlink. It stays on its links while its stream has bytes
// to send and leaves them while the stream waits for its source (a
// partial copy still arriving).
type flow struct {
	up, down   *link
	iu, id     int     // index in up.flows and down.flows
	rate       float64 // bytes per second, from the last rebalance
	remaining  float64 // bytes of the current chunk not yet sent
	last       time.Duration
	gen        uint64 // invalidates a scheduled chunk completion
	on         bool
	mark       int64
	frozen     bool
	onChunkOut func() // the current chunk left the sender entirely
}

// network holds the links and recomputes rates when a flow joins or
// leaves: only the flows that share a link, transitively, with the one
// that changed (its component) can change rate.
type network struct {
	eng   *engine
	pass  int64
	comp  []*flow
	links []*link
	// rebalances and rebalanced count the work done (reported).
	rebalances, rebalanced int64
}

// refresh fills an idle link's bucket up to now.
func (l *link) refresh(now time.Duration) {
	if len(l.flows) == 0 && now > l.idleSince {
		l.tokens = math.Min(l.burst, l.tokens+l.cap*(now-l.idleSince).Seconds())
	}
	if len(l.flows) == 0 {
		l.idleSince = now
	}
}

// take returns how many of size bytes the buckets of up and down pass at
// once, and takes them from both.
func (n *network) take(up, down *link, size int64) float64 {
	up.refresh(n.eng.now)
	down.refresh(n.eng.now)
	free := math.Min(float64(size), math.Min(up.tokens, down.tokens))
	if free <= 0 {
		return 0
	}
	up.tokens -= free
	down.tokens -= free
	return free
}

func (n *network) addFlow(f *flow) {
	f.up.refresh(n.eng.now)
	f.down.refresh(n.eng.now)
	f.on = true
	f.last = n.eng.now
	f.iu = len(f.up.flows)
	f.up.flows = append(f.up.flows, f)
	f.id = len(f.down.flows)
	f.down.flows = append(f.down.flows, f)
	n.rebalance(f.up, f.down)
}

func (n *network) removeFlow(f *flow) {
	if !f.on {
		return
	}
	n.settle(f)
	f.on = false
	f.gen++
	drop := func(l *link, i int) {
		last := len(l.flows) - 1
		m := l.flows[last]
		l.flows[i] = m
		if m.up == l {
			m.iu = i
		}
		if m.down == l {
			m.id = i
		}
		l.flows[last] = nil
		l.flows = l.flows[:last]
	}
	drop(f.up, f.iu)
	drop(f.down, f.id)
	for _, l := range [2]*link{f.up, f.down} {
		if len(l.flows) == 0 {
			l.idleSince = n.eng.now
		}
	}
	n.rebalance(f.up, f.down)
}

// settle brings f's remaining bytes up to now at its current rate.
func (n *network) settle(f *flow) {
	if dt := n.eng.now - f.last; dt > 0 && f.rate > 0 {
		f.remaining = math.Max(0, f.remaining-f.rate*dt.Seconds())
	}
	f.last = n.eng.now
}

// rebalance gives every flow of the components of a and b its max-min
// fair rate (progressive filling) and reschedules its chunk's end.
func (n *network) rebalance(a, b *link) {
	n.rebalances++
	n.pass++
	pass := n.pass
	n.comp = n.comp[:0]
	n.links = n.links[:0]
	stack := []*link{a, b}
	for len(stack) > 0 {
		l := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if l.mark == pass {
			continue
		}
		l.mark = pass
		n.links = append(n.links, l)
		for _, f := range l.flows {
			if f.mark != pass {
				f.mark = pass
				n.comp = append(n.comp, f)
				stack = append(stack, f.up, f.down)
			}
		}
	}
	n.rebalanced += int64(len(n.comp))
	for _, f := range n.comp {
		n.settle(f)
		f.frozen = false
	}
	for _, l := range n.links {
		l.rem, l.cnt = l.cap, len(l.flows)
	}
	left := len(n.comp)
	for left > 0 {
		var min *link
		share := math.Inf(1)
		for _, l := range n.links {
			if l.cnt > 0 {
				if s := l.rem / float64(l.cnt); s < share {
					share, min = s, l
				}
			}
		}
		if min == nil {
			break
		}
		for _, f := range min.flows {
			if f.frozen {
				continue
			}
			f.frozen = true
			f.rate = share
			left--
			for _, l := range [2]*link{f.up, f.down} {
				l.rem -= share
				l.cnt--
			}
		}
	}
	for _, f := range n.comp {
		n.schedule(f)
	}
}

// schedule arms the end of f's current chunk at its rate.
func (n *network) schedule(f *flow) {
	f.gen++
	gen := f.gen
	if !(f.rate > 0) {
		return
	}
	d := time.Duration(math.Ceil(f.remaining / f.rate * float64(time.Second)))
	n.eng.after(d, func() {
		if f.gen != gen || !f.on {
			return
		}
		f.remaining = 0
		f.last = n.eng.now
		f.onChunkOut()
	})
}

// nextChunk gives f another chunk of size bytes at its current rate,
// without leaving its links (no other flow's rate changes).
func (n *network) nextChunk(f *flow, size int64) {
	f.remaining = float64(size) - n.take(f.up, f.down, size)
	f.last = n.eng.now
	n.schedule(f)
}
