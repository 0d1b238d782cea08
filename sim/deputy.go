package sim

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
	"google.golang.org/protobuf/proto"
)

// Locate deputies (Params.Deputies, a what-if the cluster does not run):
// a shard's receivers are split into groups, and each group's Locates go
// to a deputy host, which sends them on to the shard's home in batches:
// the first Locate of an object alone, the ones that come while a batch
// is out in the next, at once when its answers are back. The home takes
// in one message a batch, not one a receiver, and sends the batch's
// answers back in one message (an inline object's bytes once); the
// deputy hands each receiver its own. An answer that names a sender (a
// streamed object) has no bytes to share: the home sends it back at once,
// and once a deputy saw one it passes the object's Locates on one by one
// as they come. A streamed object's receivers start at their own
// answers, and a batch would hold the first of them back for the last.
// A Locate waits at the deputy only when others of its object are out
// (DeputyWindow): a lone Get pays the hop, not the window.
//
// Every Locate still reaches the home's table or index, after its
// receiver sent it: an answer says what the shard held at a moment
// inside the Get, as a Locate sent straight does. Coalescing answers
// (one Locate answering those that came while it was out) would not:
// a Get started after a Delete completed could take the bytes of an
// answer sent before it.

// DeputyWindow is how long a deputy holds an object's first Locate for
// others to go with it.
var DeputyWindow = 200 * time.Microsecond

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

// deputyState is what a deputy holds of one object's Locates.
type deputyState struct {
	home *host
	// queue holds the Locates that wait for the window to end.
	queue []deputyWaiter
	// waiting are the Locates sent on and not answered yet.
	waiting []deputyWaiter
	// streamed: an answer named a sender, or the table held a Locate
	// to answer later (the object not there yet); Locates pass one by
	// one.
	streamed bool
}

// deputyBatch collects the answers the home makes while it steps a
// batch, to send them back in one message.
type deputyBatch struct {
	key      deputyKey
	replies  []deputyAnswer
	open     bool
	batching bool // the deputy's batch (not a Locate passed on alone)
	size     int  // its Locates
	answered int  // of them, answered on their own while it was stepped
}

// deputyAnswer is one answer for a deputy to hand on.
type deputyAnswer struct {
	to fetchReply
	m  *messages.LocateReply
}

// deputyReply is the table's reply target of a Locate that came in a
// batch.
type deputyReply struct {
	to fetchReply
	b  *deputyBatch
}

// locateTarget is the host a Locate from h for shard s connects to: its
// group's deputy, the first live host from the home's successor on (a
// member's view of who lives), or the home itself without deputies, when
// h is the home, or when the deputy would be the home.
func (w *world) locateTarget(h *host, s *shard) *host {
	home := w.shardHost(s)
	r := w.p.Deputies
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

// viaDeputy carries a Locate from h to its deputy d, which batches it or
// passes it on.
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
		if st.streamed {
			w.deputyForward(key, st, s, []deputyWaiter{wt}, false)
			return
		}
		if len(st.waiting) == 0 && len(st.queue) == 0 {
			// Nothing else of the object is out: no wait.
			w.deputyForward(key, st, s, []deputyWaiter{wt}, true)
			return
		}
		st.queue = append(st.queue, wt)
		if len(st.queue) > 1 {
			return
		}
		// A Locate that comes while others of its object are out waits
		// DeputyWindow for more, which go with it.
		w.eng.after(DeputyWindow, func() {
			if st != w.deputies[key] || len(st.queue) == 0 || !d.alive {
				return
			}
			q := st.queue
			st.queue = nil
			w.deputyForward(key, st, s, q, true)
		})
	})
}

// deputyForward sends Locates from a deputy to the home in one message.
// The home takes the message in once, answers each Locate as a Locate
// sent straight is answered (its index's, or its table's after the
// shard's queue), and sends the answers it made back together.
func (w *world) deputyForward(key deputyKey, st *deputyState, s *shard, batch []deputyWaiter, batching bool) {
	d := key.d
	home := w.shardHost(s)
	st.home = home
	st.waiting = append(st.waiting, batch...)
	w.deputyBatches++
	b := &deputyBatch{key: key, open: true, batching: batching, size: len(batch)}
	w.post(d, home, qConn, viaRequest, 0, func() {
		if s.t != key.t {
			return // the shard moved: the answers never come (deputyHostDied)
		}
		// The index's answer with the bytes is one on the uplink for the
		// whole batch (it goes back in one message): the first Locate
		// answered so counts it, and the batch's others take the same
		// bytes.
		var bytesAnswer *messages.LocateReply
		var next func(i int)
		next = func(i int) {
			if i == len(batch) {
				b.open = false
				w.deputyAnswers(s, home, b)
				return
			}
			wt := batch[i]
			ctx := deputyReply{to: wt.ctx, b: b}
			step := func() { w.shardStep(s, wt.m, ctx); next(i + 1) }
			o := s.inline.Lookup(wt.m.GetObjectId())
			if o == nil {
				w.work(home, qShard, w.cost(qShard), step)
				return
			}
			w.work(home, qConn, w.p.quickCost(), func() {
				r := o.AnswerLocate(wt.m, w.now())
				if bytesAnswer != nil && wt.m.GetFailedSender() == nil {
					r = proto.Clone(bytesAnswer).(*messages.LocateReply)
					r.Attempt = wt.m.GetAttempt()
				}
				if r == nil {
					w.work(home, qShard, w.cost(qShard), step)
					return
				}
				bytesAnswer = r
				s.served++
				s.quick++
				w.route(home, outbox.Send{To: ctx, Msg: r})
				next(i + 1)
			})
		}
		next(0)
	})
}

// deputyAnswers sends a batch's answers from the home to its deputy in
// one message (the inline bytes once: every answer is of one object),
// where each goes on to its receiver; then the deputy sends the Locates
// that came meanwhile.
func (w *world) deputyAnswers(s *shard, home *host, b *deputyBatch) {
	var n int64
	for _, a := range b.replies {
		n = max(n, int64(len(a.m.GetInlineData())))
	}
	d := b.key.d
	w.sendBytes(home, d, qConn, viaRequest, n, func() {
		st := w.deputies[b.key]
		for _, a := range b.replies {
			w.deputyHandOn(st, d, a)
		}
		if st != nil && b.batching && len(b.replies)+b.answered < b.size {
			// The table holds some Locates (the object is not there
			// yet): its answers will come one by one anyway.
			st.streamed = true
		}
		w.deputyIdle(b.key, st)
	})
}

// deputyHandOn sends one answer from deputy d to its receiver, and
// notes what it says of the object.
func (w *world) deputyHandOn(st *deputyState, d *host, a deputyAnswer) {
	if st != nil {
		if !a.m.GetHasInline() && a.m.GetError() == nil {
			st.streamed = true
		}
		st.waiting = slices.DeleteFunc(st.waiting, func(wt deputyWaiter) bool { return wt.ctx == a.to })
	}
	w.sendBytes(d, a.to.h, qStore, viaRequest, int64(len(a.m.GetInlineData())), func() { w.locateAnswered(a.to, a.m) })
}

// deputyIdle forgets a deputy's state of an object once nothing of it
// is out or waits.
func (w *world) deputyIdle(key deputyKey, st *deputyState) {
	if st != nil && !st.streamed && len(st.queue) == 0 && len(st.waiting) == 0 {
		delete(w.deputies, key)
	}
}

// deputyReplied takes one of the table's answers to a batched Locate:
// into its batch while the home steps it, else (a Locate the table
// answered later) on its own, through the deputy.
func (w *world) deputyReplied(from *host, to deputyReply, m *messages.LocateReply) {
	if to.b.open && m.GetHasInline() {
		to.b.replies = append(to.b.replies, deputyAnswer{to: to.to, m: m})
		return
	}
	if to.b.open {
		to.b.answered++ // a sender's answer goes at once: no bytes to share
	}
	d := to.b.key.d
	w.sendBytes(from, d, qConn, viaRequest, int64(len(m.GetInlineData())), func() {
		st := w.deputies[to.b.key]
		w.deputyHandOn(st, d, deputyAnswer{to: to.to, m: m})
		w.deputyIdle(to.b.key, st)
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
