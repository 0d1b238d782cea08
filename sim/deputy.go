package sim

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/locatedeputy"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// Locate deputies (Params.Deputies), as members run them
// (internal/member/locate_deputy.go): a shard's receivers are split into
// groups (here by index, in blocks; members by a hash of their id), and
// each group's Locates go to a deputy host, which sends them on to the
// home alone or in batches as package locatedeputy's rule says, the
// members' own. The home takes a batch in once and answers it from its
// published inline objects only (inlineindex.Object.AnswerBatch), with
// the bytes once in one message back; a Locate sent alone it answers as
// one sent straight (its index, or its table). Every Locate reaches the
// home after its Get began, so an answer says what the shard held at a
// moment inside the Get, as a Locate sent straight does.

// deputies is how many deputy groups the hosts form: as members
// configured with Params.Deputies choose (directory.LocateDeputies).
func (p Params) deputies() int { return directory.LocateDeputies(p.Deputies, p.N) }

// DeputyWindow and DeputyProbeWait are the rule's waits
// (locatedeputy.Window and ProbeWait), for a run to try others.
var (
	DeputyWindow    = locatedeputy.Window
	DeputyProbeWait = locatedeputy.ProbeWait
)

// deputyKey names one deputy's batching of one object's Locates for one
// table (a moved shard's new table starts anew).
type deputyKey struct {
	d  *host
	id string
	t  *directory.LocationTable
}

// deputyWaiter is one receiver's Locate at a deputy.
type deputyWaiter struct {
	m   *messages.Locate
	ctx fetchReply
}

// deputyState is what a deputy holds of one object's Locates: the
// rule's state (package locatedeputy, the members' own), the Locates it
// queued, and those sent on and not answered (for a failure).
type deputyState struct {
	home    *host
	rule    locatedeputy.Object
	queue   []deputyWaiter
	waiting []deputyWaiter
}

// deputyAnswer is one answer for a deputy to hand on.
type deputyAnswer struct {
	to fetchReply
	m  *messages.LocateReply
}

// deputyReply is the reply target of a Locate a deputy sent alone.
type deputyReply struct {
	to  fetchReply
	key deputyKey
}

// locateTarget is the host a Locate from h for shard s connects to: its
// group's deputy, the first live host from the home's successor on (a
// member's view of who lives), or the home itself without deputies, when
// h is the home, or when the deputy would be the home.
func (w *world) locateTarget(h *host, s *shard) *host {
	home := w.shardHost(s)
	r := w.p.deputies()
	if r <= 1 || h == home || len(w.hosts) <= 2 {
		return home
	}
	n := len(w.hosts)
	for k := range n {
		d := w.hosts[(home.idx+1+h.idx*r/n+k)%n]
		if d.alive {
			return d
		}
	}
	return home
}

// viaDeputy carries a Locate from h to its deputy d, which sends it on
// alone or in a batch, as a member's locateDeputy does
// (internal/member/locate_deputy.go).
func (w *world) viaDeputy(from, d *host, s *shard, m *messages.Locate, ctx fetchReply) {
	w.post(from, d, qConn, viaRequest, w.p.quickCost(), func() {
		key := deputyKey{d: d, id: m.GetObjectId(), t: s.t}
		st := w.deputies[key]
		if st == nil {
			st = &deputyState{}
			if w.deputies == nil {
				w.deputies = map[deputyKey]*deputyState{}
			}
			w.deputies[key] = st
		}
		wt := deputyWaiter{m: m, ctx: ctx}
		alone, wait, flush := st.rule.Arrive(w.now())
		if alone {
			w.deputyAlone(key, st, s, wt)
			return
		}
		st.queue = append(st.queue, wt)
		switch {
		case flush:
			w.deputyFlush(key, st, s)
		case wait != locatedeputy.NoWait:
			after := DeputyWindow
			if wait == locatedeputy.WaitProbe {
				after = DeputyProbeWait
			}
			w.eng.after(after, func() {
				if st != w.deputies[key] || len(st.queue) == 0 || !d.alive {
					return
				}
				st.rule.TimerFired()
				w.deputyFlush(key, st, s)
			})
		}
	})
}

// deputyFlush sends a deputy's queued Locates of an object on, in one
// batch or each alone, as the rule says.
func (w *world) deputyFlush(key deputyKey, st *deputyState, s *shard) {
	_, batch := st.rule.Flush(w.now())
	q := st.queue
	st.queue = nil
	if batch {
		w.deputyBatch(key, st, s, q)
		return
	}
	for _, wt := range q {
		st.rule.SentAlone()
		w.deputyAlone(key, st, s, wt)
	}
}

// deputyAlone sends one Locate from its deputy to the home, where it is
// answered as one sent straight is (the index's, or the table's after
// the shard's queue); the answer comes back through the deputy.
func (w *world) deputyAlone(key deputyKey, st *deputyState, s *shard, wt deputyWaiter) {
	d, home := key.d, w.shardHost(s)
	st.home = home
	st.waiting = append(st.waiting, wt)
	w.deputyBatches++
	ctx := deputyReply{to: wt.ctx, key: key}
	lat, cpu := w.p.plane(viaRequest)
	w.work(d, qSend, cpu, func() {
		w.eng.after(lat, func() {
			if s.t != key.t {
				return // the shard moved: the answer never comes (deputyHostDied)
			}
			step := func() { w.shardStep(s, wt.m, ctx) }
			o := s.inline.Lookup(wt.m.GetObjectId())
			if o == nil {
				w.work(home, qShard, w.cost(qShard)+cpu, step)
				return
			}
			w.work(home, qConn, w.p.quickCost()+cpu, func() {
				if r := o.AnswerLocate(wt.m, w.now()); r != nil {
					s.served++
					s.quick++
					w.route(home, outbox.Send{To: ctx, Msg: r})
					return
				}
				w.work(home, qShard, w.cost(qShard), step)
			})
		})
	})
}

// deputyBatch sends Locates from a deputy to the home in one message.
// The home takes it in once and answers from its published inline
// objects only (inlineindex.Object.AnswerBatch, at QuickLocateShare of a
// table's message each), with the bytes once in one message back; the
// deputy sends each Locate the home left on alone, and the object's
// later ones too.
func (w *world) deputyBatch(key deputyKey, st *deputyState, s *shard, batch []deputyWaiter) {
	d, home := key.d, w.shardHost(s)
	st.home = home
	st.waiting = append(st.waiting, batch...)
	w.deputyBatches++
	w.post(d, home, qConn, viaRequest, time.Duration(len(batch))*w.p.quickCost(), func() {
		if s.t != key.t {
			return
		}
		ls := make([]*messages.Locate, len(batch))
		for i, wt := range batch {
			ls[i] = wt.m
		}
		o := s.inline.Lookup(key.id)
		answered := o.AnswerBatch(ls, w.now())
		var n int64
		for _, ok := range answered {
			if ok {
				s.served++
				s.quick++
				n = o.Size // the bytes once, for them all
			}
		}
		w.sendBytes(home, d, qConn, viaRequest, n, func() {
			cur := w.deputies[key]
			if cur == nil {
				return // forgotten: the deputy or the home died (deputyHostDied)
			}
			cur.rule.BatchAnswered(w.now(), len(batch), slices.Contains(answered, false))
			for i, wt := range batch {
				cur.waiting = slices.DeleteFunc(cur.waiting, func(x deputyWaiter) bool { return x.ctx == wt.ctx })
				if !answered[i] {
					cur.rule.SentAlone()
					w.deputyAlone(key, cur, s, wt)
					continue
				}
				r := &messages.LocateReply{ObjectId: o.ID, Size: o.Size, Fingerprint: o.Fingerprint, HasInline: true,
					InlineData: o.Data, Attempt: wt.m.GetAttempt()}
				w.deputyHandOn(d, deputyAnswer{to: wt.ctx, m: r})
			}
			w.deputyIdle(key, cur)
		})
	})
}

// deputyHandOn sends one answer from deputy d to its receiver.
func (w *world) deputyHandOn(d *host, a deputyAnswer) {
	w.sendBytes(d, a.to.h, qStore, viaRequest, int64(len(a.m.GetInlineData())), func() { w.locateAnswered(a.to, a.m) })
}

// deputyIdle forgets a deputy's state of an object once the rule says it
// may and nothing of it waits.
func (w *world) deputyIdle(key deputyKey, st *deputyState) {
	if st != nil && st.rule.Idle(w.now()) && len(st.queue) == 0 && len(st.waiting) == 0 {
		delete(w.deputies, key)
	}
}

// deputyReplied carries the home's answer to a Locate a deputy sent
// alone back to the deputy, which hands it on and tells the rule what
// it says of the object: the Locates that waited for it go now if it
// decided how.
func (w *world) deputyReplied(from *host, to deputyReply, m *messages.LocateReply) {
	d := to.key.d
	w.sendBytes(from, d, qConn, viaRequest, int64(len(m.GetInlineData())), func() {
		w.deputyHandOn(d, deputyAnswer{to: to.to, m: m})
		st := w.deputies[to.key]
		if st == nil {
			return
		}
		st.waiting = slices.DeleteFunc(st.waiting, func(wt deputyWaiter) bool { return wt.ctx == to.to })
		if st.rule.AloneAnswered(w.now(), m, true) && len(st.queue) > 0 {
			w.deputyFlush(to.key, st, w.shards[directory.ShardIndex(to.key.id, len(w.shards))])
		}
		w.deputyIdle(to.key, st)
	})
}

// deputyHostDied ends the batching a dead host took part in. A dead
// deputy's receivers see their call fail as any Locate's does (their
// fetch's locHome); the receivers whose Locates were at a dead home in
// a deputy's batch, or waited for one, are failed here, once the failure
// is seen: they ask again, through a live deputy.
func (w *world) deputyHostDied(dead *host) {
	var keys []deputyKey
	for key, st := range w.deputies {
		if key.d == dead || st.home == dead {
			keys = append(keys, key)
		}
	}
	// In a fixed order: map order must not decide the timeline.
	slices.SortFunc(keys, func(a, b deputyKey) int {
		if c := cmp.Compare(a.d.idx, b.d.idx); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	for _, key := range keys {
		st := w.deputies[key]
		delete(w.deputies, key)
		if key.d == dead {
			continue
		}
		for _, wt := range append(st.waiting, st.queue...) {
			if fs := wt.ctx.h.fetch(wt.ctx.id); fs != nil && fs.locating == wt.m.GetAttempt() {
				fs.locateLost(wt.m.GetAttempt())
			}
		}
	}
}
