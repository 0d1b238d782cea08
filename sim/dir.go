package sim

import (
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/inlineindex"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/rendezvous"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// shard is one directory shard: the real LocationTable, on its home.
type shard struct {
	idx int
	t   *directory.LocationTable
	// inline is t's published inline objects, which the home's data
	// plane answers Locates from without the table (nil with
	// Params.ActorLocates); quick counts those answers.
	inline *inlineindex.Index
	quick  int64
	home   *host
	tick   time.Duration // the Tick armed (0: none)
	// served counts the messages it processed (its load), the Locates
	// its published objects answered among them.
	served int64
	// republishing are the hosts a rebuilt table still waits for (see
	// moveShards); moves counts the table's rebuilds.
	republishing map[*host]bool
	moves        int
	// deferred are the Reduces that came while the table rebuilt.
	deferred []func()
}

func (w *world) newShards() {
	for i := 0; i < w.p.Shards; i++ {
		w.instances++
		s := &shard{idx: i, home: w.hosts[i%len(w.hosts)]}
		w.newTable(s)
		w.shards = append(w.shards, s)
	}
}

// newTable gives shard s a new table on its home, as the cluster
// configures it: its inline answers leave at the home's uplink payload
// rate (the member's -link-rate), its fan-out is chosen for broadcasts
// to the other hosts on the network's latency and the hosts' intake, and
// it publishes its plain inline objects in an index of its own (the
// table before it serves nothing more).
func (w *world) newTable(s *shard) {
	fanOut := w.p.FanOut
	if fanOut == 0 {
		fanOut = directory.FanOutAuto
	}
	s.inline.Close()
	s.inline = nil
	cfg := directory.TableConfig{Instance: w.instances, InlineUplink: s.home.up.cap, FanOut: fanOut,
		Receivers: w.p.N - 1, Latency: w.p.Latency, Intake: w.p.intake(), Burst: w.p.Burst, CPU: w.p.cpuRate()}
	if !w.p.ActorLocates {
		s.inline = inlineindex.New()
		cfg.Inline = s.inline
	}
	s.t = directory.NewLocationTable(cfg)
}

func (w *world) shardFor(id string) *shard {
	return w.shards[directory.ShardIndex(id, len(w.shards))]
}

// shardHost is the host that runs shard s.
func (w *world) shardHost(s *shard) *host { return s.home }

// moveShards gives every shard at dead a new home, once the members see
// it gone: the live host of the highest rendezvous weight for the shard
// (the cluster's placement moves only the dead member's shards). The new
// table starts empty and asks every live store node to republish what it
// holds of the shard (objstore.Object.Publication); when each has
// answered (or died) it learns that it heard everything
// (directory.Republished): an object it knows only from partial
// copies is lost. Messages sent to the dead home meanwhile are lost, as
// the real shells' are; subscriptions are soft state, renewed by the
// coordinators' Resubscribe timers.
func (w *world) moveShards(dead *host) {
	for _, s := range w.shards {
		if s.home != dead {
			continue
		}
		var best *host
		var bestW uint64
		for _, h := range w.hosts {
			if !h.alive {
				continue
			}
			if wt := rendezvous.Weight(rendezvous.Seed(h.name), uint64(s.idx)); best == nil || wt > bestW {
				best, bestW = h, wt
			}
		}
		if best == nil {
			return
		}
		w.instances++
		s.home, s.moves, s.tick = best, s.moves+1, 0
		w.newTable(s)
		s.republishing, s.deferred = map[*host]bool{}, nil
		for _, h := range w.hosts {
			if h.alive {
				s.republishing[h] = true
			}
		}
		t := s.t
		for _, h := range w.hosts {
			if !h.alive {
				continue
			}
			w.send(best, h, qStore, viaActor, func() { w.republish(h, s, t) })
		}
	}
}

// republish is store node h's answer to shard s's Republish: its copies
// of the shard's objects, then RepublishDone, in order on one connection.
func (w *world) republish(h *host, s *shard, t *directory.LocationTable) {
	var pubs []*messages.PublishLocation
	for _, o := range h.store.Objects() {
		if w.shardFor(o.ID()) != s {
			continue
		}
		if pub, ok := o.Publication(h.ref); ok {
			pubs = append(pubs, pub)
		}
	}
	slices.SortFunc(pubs, func(a, b *messages.PublishLocation) int { return strings.Compare(a.GetObjectId(), b.GetObjectId()) })
	for _, pub := range pubs {
		w.send(h, s.home, qShard, viaActor, func() {
			if s.t == t {
				w.shardStep(s, pub, nil)
			}
		})
	}
	w.send(h, s.home, qShard, viaActor, func() { w.republishDone(s, t, h) })
}

// republishDone records that h has republished to table t of s (or
// died): the last one tells the table.
func (w *world) republishDone(s *shard, t *directory.LocationTable, h *host) {
	if s.t != t || !s.republishing[h] {
		return
	}
	delete(s.republishing, h)
	if len(s.republishing) == 0 {
		w.shardStep(s, directory.Republished{}, nil)
		d := s.deferred
		s.deferred = nil
		for _, start := range d {
			start()
		}
	}
}

// Reply targets the shards answer to (the outbox's opaque To).
type (
	fetchReply struct {
		h  *host
		id string
	}
	// createReply is a root worker waiting for its target's
	// registration: then runs with the shard's answer.
	createReply struct {
		h    *host
		then func(*messages.Error)
	}
	// coordReply: a Reduce coordinator; group, if set, collects the
	// updates of a grouped Subscribe (coordRun.subscribeGroups).
	coordReply struct {
		r     *coordRun
		group *updateGroup
	}
)

// toShard sends msg from a host to the shard of the object it names;
// ctx is who the shard answers. Locates and Subscribes are requests on
// the data plane, as the store nodes and coordinators send them; the
// rest are actor messages.
func (w *world) toShard(from *host, to directory.ShardOf, msg any, ctx any) {
	s := w.shardFor(string(to))
	via := viaActor
	switch m := msg.(type) {
	case *messages.Locate:
		w.locate(from, s, m, ctx)
		return
	case *messages.Subscribe:
		via = viaRequest
	}
	w.send(from, w.shardHost(s), qShard, via, func() { w.shardStep(s, msg, ctx) })
}

// locate carries a Locate to its shard's home as a request on the data
// plane, where it is answered as a member answers it: from the table's
// published inline objects if it names one (on the home's connections,
// for quickCost, without the table: shardactor.TryServeLocate), else,
// or if that declines it (the uplink's budget), by the table (ShardCost,
// after what the shard's queue holds). On its own host a Locate costs
// no transfer (LocateHere).
func (w *world) locate(from *host, s *shard, m *messages.Locate, ctx any) {
	home := w.shardHost(s)
	if fr, ok := ctx.(fetchReply); ok {
		if d := w.locateTarget(from, s); d != home {
			w.viaDeputy(from, d, s, m, fr)
			return
		}
	}
	w.msgs++
	lat, cpu := w.p.plane(viaRequest)
	if from == home {
		lat, cpu = 0, 0
	}
	step := func() { w.shardStep(s, m, ctx) }
	arrive := func() {
		o := s.inline.Lookup(m.GetObjectId())
		if o == nil {
			// TryServeLocate reads the id and finds nothing: the table's.
			w.work(home, qShard, w.cost(qShard)+cpu, step)
			return
		}
		w.work(home, qConn, w.p.quickCost()+cpu, func() {
			if r := o.AnswerLocate(m, w.now()); r != nil {
				s.served++
				s.quick++
				w.route(home, outbox.Send{To: ctx, Msg: r})
				return
			}
			w.work(home, qShard, w.cost(qShard), step)
		})
	}
	switch {
	case lat == 0 && cpu == 0:
		w.eng.after(0, arrive)
	case cpu <= 0:
		w.eng.after(lat, arrive)
	default:
		w.work(from, qSend, cpu, func() { w.eng.after(lat, arrive) })
	}
}

// locateAnswered hands a Locate's answer to its fetch, once it reached
// the fetch's host.
func (w *world) locateAnswered(to fetchReply, m *messages.LocateReply) {
	fs := to.h.fetch(to.id)
	if fs == nil {
		return
	}
	w.tracef(to.h, "located %s", to.id)
	if fs.locating == m.GetAttempt() {
		fs.locating = 0
		fs.inline = m.GetHasInline()
	}
	fs.step(storeproto.FetchLocated{Reply: m})
}

// shardStep hands one message to the table (as the table's event:
// the request with whom to answer) and carries out its Box.
func (w *world) shardStep(s *shard, msg any, ctx any) {
	s.served++
	ev := msg
	switch m := msg.(type) {
	case *messages.Locate:
		ev = directory.Locate{Req: m, ReplyTo: ctx}
	case *messages.CreateObject:
		ev = directory.Create{Req: m, ReplyTo: ctx}
	case *messages.Subscribe:
		ev = directory.Subscribe{Req: m, Key: ctx.(coordReply).r.id, To: ctx}
	case *messages.Unsubscribe:
		ev = directory.Unsubscribe{Req: m, Key: ctx.(coordReply).r.id}
	}
	shardDriver.step(w, s, s.t, ev)
}

// shardDriver carries out a table's Box: each send through route, and
// its Tick, which replaces the one armed, back to the table at its
// time. (Set in init: the Tick steps the table it drives.)
var shardDriver *driver[*world, *shard, any, outbox.Box]

func init() {
	shardDriver = &driver[*world, *shard, any, outbox.Box]{
		send: func(w *world, s *shard, snd outbox.Send) { w.route(w.shardHost(s), snd) },
		timer: func(w *world, s *shard, t outbox.Timer) {
			at := virt(t.At)
			s.tick = at
			w.eng.at(at, func() {
				if s.tick == at {
					s.tick = 0
					w.shardStep(s, t.Msg, nil)
				}
			})
		},
	}
}

// route carries out one of a shard's sends.
func (w *world) route(from *host, snd outbox.Send) {
	switch to := snd.To.(type) {
	case fetchReply:
		m, ok := snd.Msg.(*messages.LocateReply)
		if !ok {
			return
		}
		// An inline object's bytes come with the answer, across the
		// shard's uplink and the receiver's downlink.
		w.sendBytes(from, to.h, qStore, viaRequest, int64(len(m.GetInlineData())), func() { w.locateAnswered(to, m) })
	case deputyReply:
		if m, ok := snd.Msg.(*messages.LocateReply); ok {
			w.deputyReplied(from, to, m)
		}
	case coordReply:
		m, ok := snd.Msg.(*messages.LocationUpdate)
		if !ok {
			return
		}
		// An inline source's update is the answer to the Subscribe on
		// the data plane; any other comes as an actor message, to keep
		// its order with the later ones (directory.ServeSubscribe).
		via := viaActor
		if m.GetHasInline() {
			via = viaRequest
		} else if to.group != nil && !to.group.closed {
			to.group.updates = append(to.group.updates, m)
			return
		}
		r := to.r
		w.send(from, r.host, qCoord, via, func() {
			w.tracef(r.host, "located %s", m.GetObjectId())
			r.step(m)
		})
	case createReply:
		m, ok := snd.Msg.(*messages.CreateObjectReply)
		if !ok || to.then == nil {
			return
		}
		w.send(from, to.h, qStore, viaActor, func() { to.then(m.GetError()) })
	case *messages.NodeRef:
		// Drops and deletions at store nodes: no scenario here
		// deletes, and a stale copy's drop only ends a copy nobody
		// reads; counted as messages, not acted on.
		w.msgs++
	default:
		w.msgs++
	}
}
