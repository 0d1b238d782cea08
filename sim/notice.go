package sim

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// overlays gives every host its real revoke.Broadcaster on the binomial
// graph of all hosts.
func (w *world) overlays() error {
	names := make([]string, len(w.hosts))
	for i, h := range w.hosts {
		names[i] = h.name
	}
	for _, h := range w.hosts {
		o, err := revoke.NewOverlay(names, h.name)
		if err != nil {
			return err
		}
		h.bc = revoke.NewBroadcaster(o)
	}
	return nil
}

// kill stops host d now: its streams break (their other ends see the
// connection reset L later), its messages are lost, and its binomial
// graph neighbours, which watch it, originate the failure notice once
// they detect it.
func (w *world) kill(d *host) {
	if !d.alive {
		return
	}
	d.alive = false
	for _, st := range d.streams {
		if st.ended {
			continue
		}
		st := st
		st.cut()
		if st.dst != d {
			w.eng.after(w.p.Latency, func() {
				st.ended = false
				st.fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender %s terminated", d.name))
			})
		}
	}
	for _, o := range d.objs {
		o.gone = true
	}
	// The members see it gone: its directory shards move, the Locates
	// waiting at them fail, a rebuilding shard stops waiting for its
	// republication, the workers of the Reduces it coordinated release
	// their positions, and their callers start them again.
	w.eng.after(w.p.Detect, func() {
		for _, s := range w.shards {
			if s.republishing[d] {
				w.republishDone(s, s.t, d)
			}
		}
		w.moveShards(d)
		for _, g := range w.gone {
			g(d)
		}
		for _, c := range w.calls {
			for _, red := range c.attempts {
				if red.host != d {
					continue
				}
				for _, wk := range red.workers {
					if wk.h.alive {
						wk.stop()
					}
				}
			}
		}
	})
	for _, c := range w.calls {
		c.hostDied(d)
	}
	w.deputyHostDied(d)
	for _, h := range w.hosts {
		for _, fs := range h.fetches {
			if !fs.done && fs.locating != 0 && fs.locHome == d {
				fs.locateLost(fs.locating)
			}
		}
	}
	// Wake readers of d's copies in a fixed order (map order must not
	// decide): the streams above already carry the failure.
	if d.bc == nil {
		return
	}
	n := revoke.FailureNotice(d.name, d.name)
	watchers := d.bc.Overlay().Neighbors()
	if w.oneDetector {
		// The notice's own spread: one watcher detects, the binomial
		// graph carries it to the rest.
		watchers = watchers[:1]
	}
	for _, nb := range watchers {
		h := w.byName[nb]
		w.eng.after(w.p.Detect, func() {
			if h.alive {
				w.revokeStep(noticeAt{h: h, n: n}, revoke.Originate{Notice: n})
			}
		})
	}
}

// noticeAt is a notice's step at one host: the host, the notice, and
// how many hops its copy took to get there.
type noticeAt struct {
	h    *host
	n    revoke.Notice
	hops int
}

// revokeDriver carries out a broadcaster's decision: each copy goes to
// the member it names and is a Received step there when it arrives.
// (Set in init: its sends step the broadcasters it drives.)
var revokeDriver *driver[*world, noticeAt, revoke.Event, revoke.Decision]

func init() {
	revokeDriver = &driver[*world, noticeAt, revoke.Event, revoke.Decision]{
		send: func(w *world, at noticeAt, s outbox.Send) {
			to := w.byName[s.To.(string)]
			if to == nil {
				return
			}
			from := at.h.name
			w.send(at.h, to, qRevoke, viaActor, func() {
				w.revokeStep(noticeAt{h: to, n: at.n, hops: at.hops + 1}, revoke.Received{From: from, Notice: at.n})
			})
		},
	}
}

// revokeStep steps the broadcaster at at.h: forward, then deliver (the
// failed node leaves every core on h).
func (w *world) revokeStep(at noticeAt, ev revoke.Event) {
	h, n, hops := at.h, at.n, at.hops
	d := revokeDriver.step(w, at, h.bc, ev)
	if !d.Deliver {
		return
	}
	h.noticed, h.hops = w.eng.now, hops
	if h.noticed == 0 {
		h.noticed = 1 // delivered at time zero still counts
	}
	for _, s := range w.shards {
		if w.shardHost(s) == h {
			w.shardStep(s, directory.NodeFailed{Node: n.Subject}, nil)
		}
	}
	for _, red := range h.coords {
		red.committed(n.Subject) // a node that failed will not confirm
		if red.r != nil && !red.r.Over() {
			red.step(reduction.NodeFailed{Node: n.Subject})
		}
	}
	h.senderFailed(n.Subject)
}

// pause stops host h's processing for d: every message and chunk that
// reaches it meanwhile waits until it resumes (a process stopped or
// descheduled; its peers see no failure).
func (w *world) pause(h *host, d time.Duration) {
	until := w.eng.now + d
	for q := range h.free {
		h.free[q] = max(h.free[q], until)
	}
}
