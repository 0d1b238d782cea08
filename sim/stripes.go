package sim

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// StripeHold is how long the striped broadcast's shard keeps a stripe's
// last free place for an interior receiver still expected
// (directory.StripeConfig.Hold): longer than 1,024 receivers' Locates
// take to pass a shard's queue, so that only receivers that never ask
// make the others wait it.
const StripeHold = 100 * time.Millisecond

// stripedGet is one receiver's Get of a striped broadcast: a stream per
// stripe, each from the sender the shard's StripeTrees handed it.
type stripedGet struct {
	h       *host
	senders []*host // each stripe's last sender
	whole   []bool
	charged bool
	done    bool
	ended   time.Duration
}

// stripeID names stripe j of id in a host's copies: each stripe is a
// copy of its own, readable as far as it has arrived.
func stripeID(id string, j int) string { return fmt.Sprintf("%s#stripe%d", id, j) }

// stripedBroadcast is the broadcast scenario with Params.Stripes k > 1:
// the object's shard runs a directory.StripeTrees instead of the
// LocationTable's one sender a receiver; each receiver asks once
// (Join, a Locate on the data plane), is answered with a sender for
// each stripe as one has room, streams every stripe's byte range from
// its sender in parallel (a partial copy relays what it has), reports
// each stripe whole (an actor message, as FetchDone), and asks again
// for a stripe whose sender failed (Relocate), resuming from its own
// offset. The streams are the simulator's; the fetch protocol
// (fetchrun) drives no part of it: it fetches one range from one
// sender.
func (w *world) stripedBroadcast(c Config, out *Outcome) error {
	const id = "object"
	k := c.Stripes
	sum := w.rng.Uint64()
	creator := w.hosts[0]
	if err := w.put(creator, id, c.Size, sum); err != nil {
		return err
	}
	for j := range k {
		_, n := directory.StripeRange(c.Size, k, j)
		o := creator.obj(stripeID(id, j))
		o.size, o.written, o.sum, o.complete = n, n, sum, true
	}
	w.scheduleKill(c, out, id)
	sh := w.shardFor(id)
	trees := directory.NewStripeTrees(directory.StripeConfig{Stripes: k, Receivers: w.p.N - 1, Hold: StripeHold}, creator.name)
	// The shard's chunk for the trees' depth (plan.BroadcastChunk), for
	// what a stripe's stream moves: a k-th of the object at a k-th of an
	// uplink. A hop waits for what the link's burst does not pass at
	// once of a chunk at that rate: the whole object's chunk at the whole
	// link's rate made 2 stripes slower than the chain up to 256 hosts.
	chunk := int64(plan.BroadcastChunk(w.p.N-1, k, w.payload/float64(k), c.Size/int64(k)))
	gets := map[string]*stripedGet{}
	var order []*stripedGet

	toShard := func(from *host, via plane, fn func()) {
		w.send(from, sh.home, qShard, via, func() {
			sh.served++
			fn()
		})
	}
	var deliver func(as []directory.StripeAssignment)
	var tickAt time.Duration
	arm := func() {
		_, next := trees.Tick(w.now())
		if next.IsZero() {
			return
		}
		at := virt(next)
		if tickAt != 0 && tickAt <= at && tickAt > w.eng.now {
			return
		}
		tickAt = at
		w.eng.at(at, func() {
			if tickAt != at {
				return
			}
			tickAt = 0
			as, _ := trees.Tick(w.now())
			deliver(as)
		})
	}
	var startStripe func(g *stripedGet, j int, sender *host)
	deliver = func(as []directory.StripeAssignment) {
		byRecv := map[*stripedGet][]directory.StripeAssignment{}
		var recvs []*stripedGet
		for _, a := range as {
			g := gets[a.Receiver]
			if g == nil {
				continue
			}
			if byRecv[g] == nil {
				recvs = append(recvs, g)
			}
			byRecv[g] = append(byRecv[g], a)
		}
		for _, g := range recvs {
			as := byRecv[g]
			// One answer a receiver, on the data plane, as a LocateReply.
			w.send(sh.home, g.h, qStore, viaRequest, func() {
				for _, a := range as {
					if s := w.byName[a.Sender]; s != nil {
						startStripe(g, a.Stripe, s)
					}
				}
			})
		}
		arm()
	}
	startStripe = func(g *stripedGet, j int, sender *host) {
		if !g.h.alive || g.whole[j] {
			return
		}
		sid := stripeID(id, j)
		_, n := directory.StripeRange(c.Size, k, j)
		o := g.h.obj(sid)
		o.size = n
		from := sender.obj(sid)
		g.senders[j] = sender
		if !g.charged {
			g.charged = true
			w.chargeOperation(g.h, "get "+id)
		}
		st := w.openStream(from, g.h, o.written, n,
			func(m int64, last bool) error {
				if last {
					o.sum = from.sum
				}
				return o.advance(m)
			},
			func(err error) {
				if !g.h.alive {
					return
				}
				if err != nil {
					toShard(g.h, viaRequest, func() { deliver(trees.Relocate(w.now(), g.h.name, j, sender.name)) })
					return
				}
				o.complete, g.whole[j] = true, true
				o.wake()
				toShard(g.h, viaActor, func() { trees.Done(g.h.name, j) })
				for _, whole := range g.whole {
					if !whole {
						return
					}
				}
				g.done, g.ended = true, w.eng.now
			})
		st.limitChunk(chunk)
	}
	// The shard's member sees a host die: a receiver that never asked is
	// not waited for, and no receiver is handed the dead host's copies.
	w.gone = append(w.gone, func(d *host) {
		if !sh.home.alive {
			return
		}
		trees.Failed(d.name)
		as, _ := trees.Tick(w.now())
		deliver(as)
	})
	for _, h := range w.hosts[1:] {
		g := &stripedGet{h: h, senders: make([]*host, k), whole: make([]bool, k)}
		gets[h.name] = g
		order = append(order, g)
		toShard(h, viaRequest, func() { deliver(trees.Join(w.now(), h.name)) })
	}
	w.eng.run(c.Timeout+time.Minute, nil)
	for _, g := range order {
		if !g.h.alive {
			continue
		}
		if !g.done {
			w.violate("striped Get on %s never ended", g.h.name)
			continue
		}
		for j := range k {
			if s := g.h.obj(stripeID(id, j)).sum; s != sum {
				w.violate("striped Get on %s: stripe %d ended with checksum %x, want %x", g.h.name, j, s, sum)
			}
		}
		out.Time = max(out.Time, g.ended)
	}
	// Each stripe's tree: every receiver's last sender of it, walked up
	// to the creator without meeting a host twice.
	for j := range k {
		depth := map[*host]int{creator: 0}
		var walk func(h *host, seen int) int
		walk = func(h *host, seen int) int {
			if d, ok := depth[h]; ok {
				return d
			}
			if seen > len(w.hosts) {
				w.violate("stripe %d's tree has a cycle through %s", j, h.name)
				return 0
			}
			g := gets[h.name]
			if g == nil || g.senders[j] == nil {
				return 0
			}
			d := walk(g.senders[j], seen+1) + 1
			depth[h] = d
			return d
		}
		for _, g := range order {
			if g.done {
				out.Depth = max(out.Depth, walk(g.h, 0))
			}
		}
	}
	for _, h := range w.hosts {
		out.MaxUpload = max(out.MaxUpload, h.sent)
	}
	out.Chunk = w.maxChunk
	if left := trees.Waiting(); left != 0 {
		// Only the dead's asks may be left (they are dropped on Failed).
		live := 0
		for _, g := range order {
			if g.h.alive && !g.done {
				live++
			}
		}
		if live > 0 {
			w.violate("%d stripe asks still wait at the shard", left)
		}
	}
	return nil
}
