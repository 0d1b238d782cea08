package sim

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// coordRun is one Reduce's coordinator: the real reduction.Reduction
// on the host that runs the target's shard.
type coordRun struct {
	w      *world
	id     string
	host   *host
	caller *host
	req    *messages.Reduce
	r      *reduction.Reduction
	timers map[any]uint64
	// reply is the answer and when the caller had it.
	reply   *messages.ReduceReply
	replyAt time.Duration
	begun   time.Duration
	// root is the root worker whose result the coordinator took.
	root     *worker
	commitAt time.Duration
	workers  []*worker
	// latest is the newest worker of each position on each host.
	latest map[workerKey]*worker
	// held is a successful answer kept back, as the coordinator's shell
	// keeps it, until every node it sent a ReduceCommit has confirmed it
	// (or failed): committing names those nodes.
	held       *messages.ReduceReply
	committing map[string]bool
	// after are the sends that came after the held answer (its releases
	// and unsubscriptions): they follow it, as the shell sends them.
	after []outbox.Send
	// commitTo is the host the coordinator last committed a root on.
	commitTo *host
	// call is the caller's Reduce this is an attempt of.
	call *reduceCall
	// subs are the Subscribes a step sent, by shard in the order of each
	// shard's first: they go together (subscribeGroups), as a member's
	// coordinator sends them in a grouped SubscribeBatch.
	subs      map[*shard][]*messages.Subscribe
	subOrder  []*shard
	subsArmed bool
}

// updateGroup collects the updates a grouped Subscribe's steps make for
// their coordinator (coordReply.group), which the shard then sends as
// one message (shardactor's LocationUpdateBatch).
// The table keeps the subscription's To, the group among it: an update
// it makes after the group's steps (closed) goes alone.
type updateGroup struct {
	updates []*messages.LocationUpdate
	closed  bool
}

// subscribeLater queues a Subscribe to go with the others of this
// instant's steps, one message per shard.
func (red *coordRun) subscribeLater(w *world, m *messages.Subscribe) {
	s := w.shardFor(m.GetObjectId())
	if red.subs == nil {
		red.subs = map[*shard][]*messages.Subscribe{}
	}
	if _, ok := red.subs[s]; !ok {
		red.subOrder = append(red.subOrder, s)
	}
	red.subs[s] = append(red.subs[s], m)
	if !red.subsArmed {
		red.subsArmed = true
		w.eng.after(0, func() { red.subscribeGroups(w) })
	}
}

// subscribeGroups sends each shard its queued Subscribes as one request
// on the data plane (a shard's table step each), and each shard answers
// the updates they made for streamed objects in one actor message (a
// coordinator step each); an inline source's update is the request's
// answer, as alone.
func (red *coordRun) subscribeGroups(w *world) {
	order, subs := red.subOrder, red.subs
	red.subOrder, red.subs, red.subsArmed = nil, nil, false
	for _, s := range order {
		group := subs[s]
		home := w.shardHost(s)
		w.post(red.host, home, qShard, viaRequest, time.Duration(len(group))*w.cost(qShard), func() {
			g := &updateGroup{}
			for _, m := range group {
				s.served++
				shardDriver.step(w, s, s.t, directory.Subscribe{Req: m, Key: red.id, To: coordReply{r: red, group: g}})
			}
			g.closed = true
			if len(g.updates) == 0 {
				return
			}
			w.post(home, red.host, qCoord, viaActor, time.Duration(len(g.updates))*w.cost(qCoord), func() {
				for _, u := range g.updates {
					w.tracef(red.host, "located %s", u.GetObjectId())
					red.step(u)
				}
			})
		})
	}
}

// worker runs one tree position on a host: it streams its children's
// outputs, adds them to its own source chunk by chunk and offers the sum
// as it grows (to its parent, or, at the root, as the target).
type worker struct {
	r       *coordRun
	h       *host
	t       *messages.ReduceTask
	own     *objState
	out     *objState
	inputs  []*stream
	from    []*objState
	recv    []int64
	sums    []uint64
	ended   []bool
	stopped bool
	done    bool
}

// reduceCall is one Reduce as its caller's store node runs it: an
// attempt at the target's shard, and, if the shard's member dies before
// it answers, another at the shard's new home with the time left and the
// same call id (as storenode's startReduce does).
type reduceCall struct {
	w      *world
	caller *host
	req    *messages.Reduce
	cfg    reduction.Config
	call   string
	// deadline is the caller's, in virtual time; wait the pause before
	// the next attempt (5 ms, doubling to 200 ms).
	deadline time.Duration
	wait     time.Duration
	cur      *coordRun
	attempts []*coordRun
	reply    *messages.ReduceReply
	replyAt  time.Duration
}

// startReduce has caller ask the target's shard for a Reduce.
func (w *world) startReduce(caller *host, req *messages.Reduce, cfg reduction.Config) *reduceCall {
	c := &reduceCall{w: w, caller: caller, req: req, cfg: cfg, call: "c1",
		deadline: w.eng.now + time.Duration(req.GetTimeoutMs())*time.Millisecond, wait: 5 * time.Millisecond}
	c.attempt(req)
	return c
}

// attempt sends the call to the target shard's current home.
func (c *reduceCall) attempt(req *messages.Reduce) {
	w := c.w
	s := w.shardFor(req.GetTargetId())
	coord := w.shardHost(s)
	red := &coordRun{w: w, id: directory.ReduceID(req.GetTargetId(), c.call, fmt.Sprint(len(c.attempts)+1)), host: coord,
		caller: c.caller, req: req, timers: map[any]uint64{}, begun: w.eng.now, call: c}
	c.cur = red
	c.attempts = append(c.attempts, red)
	if len(c.attempts) == 1 {
		w.calls = append(w.calls, c)
	}
	w.send(c.caller, coord, qShard, viaActor, func() {
		if s.home != coord {
			return // the shard moved away: the caller's watch sees its member gone
		}
		if len(s.republishing) > 0 {
			// A rebuilt shard starts no Reduce before every store node has
			// republished.
			s.deferred = append(s.deferred, func() { c.begin(red, s) })
			return
		}
		c.begin(red, s)
	})
}

// begin runs attempt red at shard s: reserve the target, then the
// coordinator with the caller's time left.
func (c *reduceCall) begin(red *coordRun, s *shard) {
	w := c.w
	if red != c.cur || !red.host.alive {
		return
	}
	left := c.deadline - w.eng.now
	if left <= 0 {
		red.answer(&messages.ReduceReply{TargetId: c.req.GetTargetId(),
			Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "reduce into %q: the deadline passed while its directory shard rebuilt", c.req.GetTargetId())})
		return
	}
	committed, err := s.t.Reserve(c.req.GetTargetId(), red.id)
	switch {
	case err != nil:
		red.answer(&messages.ReduceReply{TargetId: c.req.GetTargetId(), Error: err})
		return
	case committed != nil:
		// An earlier attempt committed the target before its coordinator
		// died: the shard answers with its result, as the real one does.
		var unreduced []string
		for _, id := range c.req.GetSourceIds() {
			if !slices.Contains(committed, id) {
				unreduced = append(unreduced, id)
			}
		}
		red.answer(&messages.ReduceReply{TargetId: c.req.GetTargetId(), ReducedIds: committed, UnreducedIds: unreduced})
		return
	}
	// L and B as a member's estimator measures them: half a data-plane
	// round trip (its warm-up's pings), and what a stream moves at, the
	// slower of the link and the receiver's CPU a byte. Given the link's
	// rate on 10 Gbit/s links, where the CPU takes 476 MB/s, the cost
	// model priced a chain's fill at 2.5 times less than it took; given
	// the wire's 20 µs for L, it kept a chain for the reduce at 512 and
	// 1,024 hosts with the unshaped CPU (0.189 and 0.377 s), where the
	// tree of degree 2 it chooses with L measured takes 0.170 and 0.293 s.
	red.r = reduction.NewReductionFor(red.id, red.req, c.caller.ref, c.cfg, w.now(), left, w.p.measuredLatency(), w.p.intake())
	red.host.coords = append(red.host.coords, red)
	w.tracef(red.host, "reduce %s begins at its coordinator", red.id)
	red.step(reduction.Begin{})
}

// hostDied is the caller's watch on its attempt's coordinator: if that
// member died before answering, the Reduce starts again at the target
// shard's new home after a pause, with the time left.
func (c *reduceCall) hostDied(d *host) {
	w := c.w
	if c.reply != nil || c.cur.host != d || !c.caller.alive {
		return
	}
	w.eng.after(w.p.Detect+c.wait, func() {
		if c.reply != nil || c.cur.host != d || !c.caller.alive {
			return
		}
		left := c.deadline - w.eng.now
		if left <= 0 {
			return // the caller's own deadline answers
		}
		req := proto.CloneOf(c.req)
		req.TimeoutMs = max(1, left.Milliseconds())
		c.wait = min(2*c.wait, 200*time.Millisecond)
		c.attempt(req)
	})
}

// step steps the Reduction with ev at the world's now (the simulator's
// driver carries out its Box).
func (red *coordRun) step(ev any) { reduceDriver.step(red.w, red, red.r, ev) }

// reduceDriver carries out a Reduction's Box: a timer replaces the
// pending one with its message and comes back as its event unless the
// Reduce is over or its host died; a send goes where its address names
// (a shard, the caller, a store node), a successful answer held while a
// commit is unconfirmed. Set in init: its hooks step the Reductions it
// drives.
var reduceDriver *driver[*world, *coordRun, any, reduction.Effects]

func init() {
	reduceDriver = &driver[*world, *coordRun, any, reduction.Effects]{
		send:  func(w *world, red *coordRun, s outbox.Send) { red.send(w, s) },
		timer: func(w *world, red *coordRun, t outbox.Timer) { red.timer(w, t) },
	}
}

func (red *coordRun) timer(w *world, t outbox.Timer) {
	kind := t.Msg
	red.timers[kind]++
	gen := red.timers[kind]
	w.eng.at(virt(t.At), func() {
		if red.timers[kind] != gen || !red.host.alive || red.r.Over() {
			return
		}
		red.step(kind)
	})
}

func (red *coordRun) send(w *world, snd outbox.Send) {
	if red.held != nil {
		red.after = append(red.after, snd)
		return
	}
	switch to := snd.To.(type) {
	case directory.ShardOf:
		if m, ok := snd.Msg.(*messages.Subscribe); ok && !w.p.SingleUpdates {
			red.subscribeLater(w, m)
			return
		}
		w.toShard(red.host, to, snd.Msg, coordReply{r: red})
	case reduction.TargetShard:
		w.toShard(red.host, directory.ShardOf(red.req.GetTargetId()), snd.Msg, nil)
	case reduction.Requester:
		m := snd.Msg.(*messages.ReduceReply)
		if m.GetError() == nil && len(red.committing) > 0 {
			red.held = m
			return
		}
		red.answer(m)
	case *messages.NodeRef:
		h := w.hostOf(to)
		msg := snd.Msg
		if c, ok := msg.(*messages.ReduceCommit); ok {
			if !c.GetMarkOnly() {
				red.commitTo = h
			}
			if red.committing == nil {
				red.committing = map[string]bool{}
			}
			red.committing[to.GetNodeId()] = true
			if red.held == nil {
				// Answered as committed at the deadline at the latest.
				w.eng.at(virt(red.r.Deadline()), func() {
					if red.held != nil {
						red.committing = nil
						red.release()
					}
				})
			}
		}
		if t, ok := msg.(*messages.ReduceTask); ok {
			w.tracef(red.host, "sends p%d its task (to %s)", t.GetPosition(), h.name)
		}
		switch m := msg.(type) {
		case *messages.ReduceTask, *messages.ReduceTaskBatch:
			// Tasks cross the coordinator's uplink as bytes: a sliced
			// AllReduce's are about 400 bytes a position, n² of them
			// (26 MB at 256 hosts), which a message's CPU alone did
			// not charge.
			w.sendBytes(red.host, h, qStore, viaActor, int64(proto.Size(m.(proto.Message))), func() { red.atNode(h, msg) })
		default:
			w.send(red.host, h, qStore, viaActor, func() { red.atNode(h, msg) })
		}
	}
}

// answer sends the Reduce's answer to its caller.
func (red *coordRun) answer(m *messages.ReduceReply) {
	w, c := red.w, red.call
	w.tracef(red.host, "answers")
	w.send(red.host, red.caller, qStore, viaActor, func() {
		w.tracef(red.caller, "has the answer")
		if red.reply == nil {
			red.reply, red.replyAt = m, w.eng.now
		}
		if c.reply == nil && c.cur == red {
			c.reply, c.replyAt = m, w.eng.now
		}
	})
}

// committed records that node confirmed its commit, or failed, and
// sends a held answer once no commit is outstanding.
func (red *coordRun) committed(node string) {
	if !red.committing[node] {
		return
	}
	delete(red.committing, node)
	if len(red.committing) == 0 {
		red.release()
	}
}

func (red *coordRun) release() {
	if m := red.held; m != nil && red.host.alive {
		red.held = nil
		red.answer(m)
		after := red.after
		red.after = nil
		for _, s := range after {
			red.send(red.w, s)
		}
	}
}

// atNode is a store node's handling of a coordinator's message.
func (red *coordRun) atNode(h *host, msg any) {
	w := red.w
	switch m := msg.(type) {
	case *messages.ReduceTask:
		w.tracef(h, "p%d's task arrives", m.GetPosition())
		red.startWorker(h, m)
	case *messages.ReduceTaskBatch:
		ts, err := reduction.BatchTasks(m)
		if err != nil {
			w.violate("%s refused the coordinator's ring share: %v", h.name, err)
		}
		for _, t := range ts {
			red.startWorker(h, t)
		}
	case *messages.ReduceInvalidate:
		for _, wk := range red.workers {
			if wk.h == h && wk.t.GetPosition() == m.GetPosition() && wk.t.GetGeneration() == m.GetGeneration() {
				wk.stop()
			}
		}
	case *messages.ReduceRelease:
		for _, wk := range red.workers {
			if wk.h == h && wk != red.root {
				wk.stop()
			}
		}
	case *messages.ReduceCommit:
		for _, wk := range red.workers {
			if !m.GetMarkOnly() && wk.h == h && wk.t.GetPosition() == m.GetPosition() && wk.t.GetGeneration() == m.GetGeneration() && wk.done {
				if red.root == nil || !wk.t.GetGather() || wk.t.GetRoot() {
					red.root = wk // a sliced run's: the creator's gather
				}
				red.commitAt = w.eng.now
				w.tracef(h, "p%d commits the target", wk.t.GetPosition())
				wk.out.complete = true
				h.commitTarget(wk.out, m)
				wk.out.wake()
			}
		}
		if m.GetMarkOnly() {
			// A participant's copy of an AllReduce's result records the
			// run and its sources, as the store node marks it: a shard
			// rebuilt later learns the committed result from it.
			if o := h.store.Lookup(m.GetTargetId()); o != nil {
				if p, _ := o.Producer(); p == "" {
					o.SetProducer(m.GetReduceId(), 0)
					o.SetReduced(m.GetReducedIds())
				}
			}
		}
		// The node confirms (ReduceCommitted).
		red.toCoord(h, func() { red.committed(h.name) })
	case *messages.DropObject:
		// A stale copy of the target (its run was abandoned): a fetch of
		// it starts over (RESET), as a dropped store object's readers do.
		id := m.GetObjectId()
		if fs := h.fetch(id); fs != nil && fs.stream != nil && !fs.stream.ended {
			st, sid := fs.stream, fs.sid
			st.cut()
			fs.step(storeproto.FetchStreamEnded{Stream: sid, Err: messages.Errorf(messages.ErrorCode_RESET, "dropped")})
		} else {
			h.drop(id)
		}
	case *messages.Get:
		// An AllReduce's participant fetches the result.
		w.get(h, m.GetObjectId(), func(fs *fetchSession) {
			err := fs.err
			w.send(h, red.host, qCoord, viaActor, func() { red.step(reduction.Fetched{Node: h.name, Err: err}) })
		})
	}
}

// commitTarget keeps the committed copy o of a Reduce's target in h's
// store as the store node keeps its root's output: written whole, marked
// with the run and its generation, completed by the commit with the
// sources it reduced (objstore.Store.CommitTarget). A shard rebuilt
// after the coordinator died learns the committed result from its
// republication, and the call's next attempt answers with it
// (LocationTable.Reserve) instead of reducing again beside a copy that
// holds another result.
func (h *host) commitTarget(o *objState, m *messages.ReduceCommit) {
	if h.store.Lookup(o.id) != nil {
		return // a fetched copy's object: the fetch keeps it
	}
	so, _, err := h.store.Create(o.id, o.size, 0)
	if err != nil {
		return
	}
	so.SetProducer(m.GetReduceId(), m.GetGeneration())
	so.HoldTail()
	if so.NewWriter().Advance(int(o.size)) != nil {
		return
	}
	h.store.CommitTarget(o.id, m.GetReduceId(), m.GetGeneration(), m.GetReducedIds())
}

// workerKey names a task position on a host.
type workerKey struct {
	h   *host
	pos int32
}

func (red *coordRun) startWorker(h *host, t *messages.ReduceTask) {
	w := red.w
	// The node runs the newest generation of a position: the worker
	// before this one there stops (every older one stopped when its
	// successor started). A map, not a scan of every worker: a sliced
	// AllReduce starts 2n² of them, and the scan made a run at 256 hosts
	// take 20 s of wall time, 80 % of it here.
	key := workerKey{h: h, pos: t.GetPosition()}
	if old := red.latest[key]; old != nil {
		old.stop()
	}
	wk := &worker{r: red, h: h, t: t, own: h.objs[t.GetSourceId()]}
	if red.latest == nil {
		red.latest = map[workerKey]*worker{}
	}
	red.latest[key] = wk
	red.workers = append(red.workers, wk)
	h.workers = append(h.workers, wk)
	// A gather or a relay of a sliced AllReduce has no source: it copies
	// its children's slices.
	copies := t.GetGather() || t.GetRelay()
	if !copies && (wk.own == nil || !wk.own.complete) {
		w.violate("task p%d on %s names source %q it does not hold", t.GetPosition(), h.name, t.GetSourceId())
		return
	}
	started := &messages.ReduceTaskStarted{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration()}
	if len(t.GetChildren()) == 0 && !t.GetRoot() && !t.GetSliced() {
		// A leaf: its output is its source, whole already.
		wk.out, wk.done = wk.own, true
		red.toCoord(h, func() { red.step(started) })
		red.toCoord(h, func() {
			red.step(&messages.ReduceTaskDone{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration()})
		})
		return
	}
	if t.GetRoot() {
		// A copy fetched from an earlier root of this Reduce is stale: the
		// real worker removes it and creates the target anew.
		if o := h.objs[t.GetOutputId()]; o != nil && o.writer != nil {
			h.drop(t.GetOutputId())
		}
		if o := h.objs[t.GetOutputId()]; o != nil && o.producer != red.id {
			// Another attempt's output (its coordinator died): the real
			// worker aborts that store object and makes its own, so the
			// old attempt's workers and readers keep theirs.
			delete(h.objs, t.GetOutputId())
			o.gone = true
			o.wake()
		}
	}
	out := h.obj(t.GetOutputId())
	out.producer = red.id
	out.size, out.written, out.complete, out.gone, out.held, out.sum = t.GetSize(), 0, false, false, t.GetRoot() || t.GetGather(), 0
	wk.out = out
	if !t.GetRoot() {
		if !t.GetQuiet() {
			red.toCoord(h, func() { red.step(started) })
		}
		wk.open()
		return
	}
	// A root registers the target with its shard and waits for the
	// answer before it reports and reads its inputs, as the real worker
	// creates its output first.
	w.toShard(h, directory.ShardOf(t.GetTargetId()), &messages.CreateObject{ObjectId: t.GetTargetId(), Size: t.GetSize(),
		Creator: h.ref, ReduceId: t.GetReduceId(), ReduceGeneration: t.GetGeneration(), Unoffered: t.GetGather()},
		createReply{h: h, then: func(err *messages.Error) {
			w.tracef(h, "p%d's target registered", t.GetPosition())
			if wk.stopped {
				return
			}
			if err != nil {
				started.Error = err
				wk.stop()
			}
			red.toCoord(h, func() { red.step(started) })
			if err == nil {
				wk.open()
			}
		}})
}

// open streams the worker's children's outputs to it.
func (wk *worker) open() {
	w, h, t := wk.r.w, wk.h, wk.t
	n := len(t.GetChildren())
	w.chargeOperation(h, "reduce "+t.GetReduceId())
	w.tracef(h, "p%d opens %d inputs", t.GetPosition(), n)
	wk.recv, wk.sums, wk.ended = make([]int64, n), make([]uint64, n), make([]bool, n)
	for k, c := range t.GetChildren() {
		ch := w.hostOf(c.GetNode())
		if ch == nil {
			w.violate("task p%d names unknown node %v", t.GetPosition(), c.GetNode())
			continue
		}
		size := t.GetSize()
		if t.GetGather() {
			// Slice k of the target: up to the next slice's offset.
			end := t.GetSize()
			if k+1 < n {
				end = t.GetChildren()[k+1].GetOffset()
			}
			size = end - c.GetOffset()
		}
		from := ch.obj(c.GetObjectId())
		if from.size < 0 {
			from.size = size
		}
		wk.from = append(wk.from, from)
		k := k
		st := w.openStream(from, h, 0, size,
			func(n int64, last bool) error {
				if wk.recv[k] == 0 || last {
					w.tracef(h, "p%d input %d from %s: chunk at %d, last %v", t.GetPosition(), k, ch.name, wk.recv[k], last)
				}
				wk.recv[k] += n
				wk.progress()
				return nil
			},
			func(err error) {
				if wk.stopped {
					return
				}
				if err != nil {
					wk.fail(err)
					return
				}
				wk.sums[k], wk.ended[k] = from.sum, true
				wk.progress()
			})
		if !t.GetGather() && !t.GetRelay() {
			st.cpu += w.p.ReduceCost
		}
		// The chunk the coordinator chose for the tree's depth, as a
		// store node's reduce worker reads its children in.
		st.limitChunk(t.GetChunk())
		wk.inputs = append(wk.inputs, st)
	}
	wk.progress() // a sliced chain's first link has no input: its slice is here
}

func (red *coordRun) toCoord(h *host, fn func()) { red.w.send(h, red.host, qCoord, viaActor, fn) }

// progress offers as much of the sum as every input has delivered.
func (wk *worker) progress() {
	if wk.stopped || wk.done {
		return
	}
	t := wk.t
	m := t.GetSize()
	all := true
	for k := range wk.recv {
		m = min(m, wk.recv[k])
		all = all && wk.ended[k]
	}
	if len(wk.recv) < len(t.GetChildren()) {
		all = false // an input could not be opened
	}
	if t.GetGather() {
		// Each slice lands at its own offset; the target is whole, and
		// written, once every slice is.
		if m = 0; all {
			m = t.GetSize()
		}
	}
	if all {
		wk.out.sum = wk.sum()
	}
	if err := wk.out.advance(m - wk.out.written); err != nil {
		wk.fail(err)
		return
	}
	if all && wk.out.written == t.GetSize() {
		wk.done = true
		if !t.GetRoot() && !t.GetGather() {
			wk.out.complete = true
		}
		red, w := wk.r, wk.r.w
		done := &messages.ReduceTaskDone{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration()}
		if t.GetGather() {
			done.Fingerprint = wk.out.sum
		}
		w.tracef(wk.h, "p%d done", t.GetPosition())
		if t.GetQuiet() {
			return // as a store node's worker: only a failure is reported
		}
		red.toCoord(wk.h, func() {
			w.tracef(red.host, "p%d's done arrives", t.GetPosition())
			red.step(done)
		})
	}
}

// sum is the checksum of the worker's output once every input ended. A
// copy's checksum stands for its content whatever range of it a stream
// moved, so a slice of a source carries the source's: a position sums
// its own and its inputs', a relay passes its input's on, and a gather's
// target holds their common value only if every slice reduced the same
// sources (else a value no sum of sources has, which the invariants
// catch).
func (wk *worker) sum() uint64 {
	t := wk.t
	switch {
	case t.GetRelay():
		return wk.sums[0]
	case t.GetGather():
		for _, s := range wk.sums[1:] {
			if s != wk.sums[0] {
				return ^wk.sums[0] ^ s ^ 0x5ca7
			}
		}
		return wk.sums[0]
	}
	sum := wk.own.sum
	for _, s := range wk.sums {
		sum += s
	}
	return sum
}

// fail handles an input's loss. An input whose node failed (or that
// left it) is not reported, as the real worker does not: the coordinator
// watches that node and sends a new generation of the task.
func (wk *worker) fail(err error) {
	wk.stop()
}

func (wk *worker) stop() {
	if wk.stopped {
		return
	}
	wk.stopped = true
	for _, st := range wk.inputs {
		st.cut()
	}
	if wk.out != nil && wk.out != wk.own && !wk.out.complete {
		wk.out.gone = true
		wk.out.wake()
	}
}

// inputsOn reports whether the worker still waits on a stream from h.
func (wk *worker) waitsOn(h *host) bool {
	if wk.stopped || wk.done {
		return false
	}
	for _, st := range wk.inputs {
		if !st.ended && st.src == h {
			return true
		}
	}
	return false
}
