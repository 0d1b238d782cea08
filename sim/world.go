package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// queue names a host's control-message server: each processes one
// message at a time for its per-message cost, so a host that many
// messages reach at once (a hot directory shard, a Reduce's coordinator)
// queues them.
type queue int

const (
	qStore  queue = iota // the store node (fetches, reduce workers)
	qShard               // the directory shards the host runs
	qCoord               // the Reduce coordinators the host runs
	qRevoke              // the failure broadcaster
	qData                // the CPU that takes received chunks in
	qConn                // the data plane's connections: Locates a shard's published inline objects answer
	qSend                // the CPU that sends control messages
	nQueues
)

// plane is how a control message travels: as a Proto.Actor message, or
// as a request on the data plane's connections.
type plane int

const (
	viaActor plane = iota
	viaRequest
)

// host is one simulated member.
type host struct {
	idx   int
	name  string
	ref   *messages.NodeRef
	alive bool
	up    link
	down  link
	free  [nQueues]time.Duration
	// jobs wait for a core of the machine (Params.CPUs > 0), by queue;
	// queued says the host is on the machine's run queue or running.
	jobs   [nQueues][]job
	queued bool
	// idle is when the host's last job ended (or ends: without shared
	// cores, the latest of its queues'); a host idle for
	// Params.WakeAfter is parked.
	idle  time.Duration
	store *objstore.Store
	objs  map[string]*objState
	// fetches are the fetches in flight here, in start order
	// (a slice: the order of every step must not depend on map order).
	fetches []*fetchSession
	streams []*stream // streams this host sends or receives
	bc      *revoke.Broadcaster
	coords  []*coordRun
	workers []*worker
	rng     *rand.Rand
	// noticed is when the failure notice reached this host (0: not yet).
	noticed time.Duration
	hops    int
	// sent is the bytes this host's uplink carried for streams.
	sent int64
}

// world is the simulated cluster: hosts, their links, and the engine.
type world struct {
	p Params
	// opCharged are the (host, operation) pairs that paid
	// Params.OperationCPU.
	opCharged map[string]bool
	eng       *engine
	net       network
	hosts     []*host
	byName    map[string]*host
	shards    []*shard
	rng       *rand.Rand
	// payload is each link's TCP payload rate, bytes per second.
	payload float64
	chunk   int64
	// fixedChunk: every stream moves chunk bytes at a time, whatever a
	// shard answers (a cluster configured with a ChunkSize).
	fixedChunk bool
	// maxChunk is the largest chunk a stream moved over a link.
	maxChunk int64
	msgs     int64
	// deputies are the Locate deputies' batching (Params.Deputies);
	// deputyBatches counts the batches they sent.
	deputies      map[deputyKey]*deputyState
	deputyBatches int64
	// queueWait is the longest a message waited for each queue kind.
	queueWait  [nQueues]time.Duration
	violations []string
	// oneDetector: only the first watcher of a failed host originates
	// its notice (the notice scenario measures the spread itself).
	oneDetector bool
	// instances numbers the directory tables, a rebuilt shard's anew.
	instances uint32
	// calls are the Reduces called, for their callers' watch.
	calls []*reduceCall
	// gone are told of a host the members saw die (Detect after it did):
	// a shard core that follows the members' view.
	gone []func(d *host)
	// cpu is the machine's shared cores (Params.CPUs > 0).
	cpu machine
	// busy is the CPU the hosts spent: every job's cost.
	busy time.Duration
	// trace is Config.Trace (nil: none).
	trace func(at time.Duration, host, step string)
}

// tracef tells Config.Trace a step of h's now.
func (w *world) tracef(h *host, format string, args ...any) {
	if w.trace != nil {
		w.trace(w.eng.now, h.name, fmt.Sprintf(format, args...))
	}
}

func newWorld(p Params) *world {
	w := &world{p: p, eng: &engine{}, byName: map[string]*host{}}
	w.net.eng = w.eng
	w.cpu = machine{w: w, idle: p.CPUs}
	w.rng = rand.New(rand.NewPCG(p.Seed, 0x51e))
	w.payload = p.Bandwidth / 8 * p.PayloadEfficiency
	for i := 0; i < p.N; i++ {
		name := fmt.Sprintf("h%04d", i)
		h := &host{idx: i, name: name, alive: true, ref: &messages.NodeRef{NodeId: name, Address: name},
			store: objstore.NewStore(1 << 50), objs: map[string]*objState{},
			rng: rand.New(rand.NewPCG(p.Seed, uint64(i)+1)), idle: -time.Hour}
		h.up.cap, h.down.cap = w.payload, w.payload
		if p.SlowFraction > 0 && w.rng.Float64() < p.SlowFraction {
			h.up.cap, h.down.cap = w.payload*p.SlowFactor, w.payload*p.SlowFactor
		}
		h.up.burst, h.down.burst = p.Burst, p.Burst
		h.up.tokens, h.down.tokens = p.Burst, p.Burst
		w.hosts = append(w.hosts, h)
		w.byName[name] = h
	}
	w.newShards()
	return w
}

func (w *world) violate(format string, args ...any) {
	if len(w.violations) < 100 {
		w.violations = append(w.violations, fmt.Sprintf("t=%v: ", w.eng.now)+fmt.Sprintf(format, args...))
	}
}

func (w *world) now() time.Time { return wall(w.eng.now) }

// hostOf is the host a node reference names (nil if none).
func (w *world) hostOf(n *messages.NodeRef) *host { return w.byName[n.GetNodeId()] }

// cost is the processing cost of one message at a queue.
func (w *world) cost(q queue) time.Duration {
	switch q {
	case qShard:
		return w.p.ShardCost
	case qCoord:
		return w.p.CoordCost
	}
	return w.p.StoreCost
}

// send carries a control message from one host to another's queue: the
// sender's CPU sends it (the plane's per-message CPU), it arrives the
// plane's latency later, the receiver's CPU takes it in, it waits for the
// queue, and fn runs when it has been processed. On one host it goes
// straight to the queue. Messages to or from a dead host are lost.
func (w *world) send(from, to *host, q queue, via plane, fn func()) {
	w.post(from, to, q, via, w.cost(q), fn)
}

// post is send with the processing cost at the queue given.
func (w *world) post(from, to *host, q queue, via plane, cost time.Duration, fn func()) {
	w.msgs++
	if from == to {
		w.eng.after(0, func() { w.work(to, q, cost, fn) })
		return
	}
	lat, cpu := w.p.plane(via)
	arrive := func() { w.work(to, q, cost+cpu, fn) }
	if cpu <= 0 {
		w.eng.after(lat, arrive)
		return
	}
	w.work(from, qSend, cpu, func() { w.eng.after(lat, arrive) })
}

func (w *world) process(h *host, q queue, fn func()) { w.work(h, q, w.cost(q), fn) }

// chargeOperation has h's data queue spend Params.OperationCPU for op,
// once per host and operation, ahead of the bytes it receives for it.
func (w *world) chargeOperation(h *host, op string) {
	if w.p.OperationCPU <= 0 {
		return
	}
	key := h.name + "\x00" + op
	if w.opCharged[key] {
		return
	}
	if w.opCharged == nil {
		w.opCharged = map[string]bool{}
	}
	w.opCharged[key] = true
	w.work(h, qData, w.p.OperationCPU, func() {})
}

// work runs fn once h's queue q has spent cost on it, after what the
// queue holds already and, on a machine of Params.CPUs cores, once a
// core is free for it.
func (w *world) work(h *host, q queue, cost time.Duration, fn func()) {
	if !h.alive {
		return
	}
	if w.parked(h) {
		cost += w.p.Wake
	}
	w.busy += cost
	if w.p.CPUs > 0 {
		w.cpu.submit(h, q, cost, fn)
		return
	}
	start := max(w.eng.now, h.free[q])
	if wait := start - w.eng.now; wait > w.queueWait[q] {
		w.queueWait[q] = wait
	}
	h.free[q] = start + cost
	h.idle = max(h.idle, h.free[q])
	w.eng.at(h.free[q], func() {
		if h.alive {
			fn()
		}
	})
}

// parked reports whether h's process has had nothing to do for
// Params.WakeAfter (no job running or waiting): its next job first pays
// Params.Wake.
func (w *world) parked(h *host) bool {
	return w.p.Wake > 0 && !(w.p.CPUs > 0 && h.queued) && w.eng.now-h.idle >= w.p.WakeAfter
}

// job is one piece of a host's processing waiting for a core.
type job struct {
	cost time.Duration
	fn   func()
	at   time.Duration // when it was submitted
}

// machine is the cores the hosts share (Params.CPUs > 0). A host runs
// one job at a time, as the testbed's nodes run at GOMAXPROCS 1: a host
// with jobs waiting joins the machine's run queue once, and the first
// free core runs its oldest job whose queue is not paused. A paused
// host joins the run queue only once the pause ends.
type machine struct {
	w    *world
	idle int
	// ready is the run queue: ready[head:] wait for a core, in order.
	ready []*host
	head  int
}

func (m *machine) submit(h *host, q queue, cost time.Duration, fn func()) {
	h.jobs[q] = append(h.jobs[q], job{cost: cost, fn: fn, at: m.w.eng.now})
	if !h.queued {
		h.queued = true
		m.enqueue(h)
	}
}

// enqueue puts h on the run queue, once a pause is over.
func (m *machine) enqueue(h *host) {
	w := m.w
	if until := slices.Max(h.free[:]); until > w.eng.now {
		w.eng.at(until, func() { m.enqueue(h) })
		return
	}
	m.ready = append(m.ready, h)
	m.dispatch()
}

// dispatch gives free cores the hosts at the run queue's front.
func (m *machine) dispatch() {
	w := m.w
	for m.idle > 0 && m.head < len(m.ready) {
		h := m.ready[m.head]
		m.ready[m.head] = nil
		m.head++
		if m.head > len(m.ready)/2 {
			m.ready = append(m.ready[:0], m.ready[m.head:]...)
			m.head = 0
		}
		if !h.alive {
			h.jobs, h.queued = [nQueues][]job{}, false
			continue
		}
		q := queue(-1)
		for k := range h.jobs {
			if len(h.jobs[k]) > 0 && (q < 0 || h.jobs[k][0].at < h.jobs[q][0].at) {
				q = queue(k)
			}
		}
		j := h.jobs[q][0]
		h.jobs[q][0] = job{}
		h.jobs[q] = h.jobs[q][1:]
		if wait := w.eng.now - j.at; wait > w.queueWait[q] {
			w.queueWait[q] = wait
		}
		m.idle--
		w.eng.after(j.cost, func() {
			m.idle++
			if h.alive {
				j.fn()
			}
			h.queued = false
			for k := range h.jobs {
				if h.alive && len(h.jobs[k]) > 0 {
					h.queued = true
				}
			}
			if h.queued {
				m.enqueue(h)
			} else {
				h.jobs = [nQueues][]job{}
				h.idle = w.eng.now
			}
			m.dispatch()
		})
	}
}

// objState is what the data plane knows of one copy of an object on a
// host: how many of its bytes are there, and its content as a checksum.
// No byte is ever allocated: fetched copies advance the real store's
// object (objstore.Writer.Advance) without writing into it.
type objState struct {
	h        *host
	id       string
	size     int64 // -1 until known
	written  int64
	sum      uint64 // the content's checksum, known once the copy is whole
	complete bool
	// held: the last byte is readable only once complete (a Reduce's
	// root holds its target until its coordinator commits it).
	held   bool
	gone   bool
	writer *objstore.Writer
	// producer is the Reduce attempt whose worker writes this output.
	producer string
	waiters  []*stream
}

func (h *host) obj(id string) *objState {
	o := h.objs[id]
	if o == nil {
		o = &objState{h: h, id: id, size: -1}
		h.objs[id] = o
	}
	return o
}

// drop removes h's copy of id, as a store node drops an object: its
// readers see it gone, and the next copy starts afresh.
func (h *host) drop(id string) {
	if o := h.objs[id]; o != nil {
		o.gone, o.complete = true, false
		delete(h.objs, id)
		o.wake()
	}
	h.store.Remove(id, messages.Errorf(messages.ErrorCode_RESET, "%q dropped on %s", id, h.name))
}

// rewound tells the streams that read o past off that the bytes they
// took are gone (RESET): their readers start over, as a rewound store
// object's readers do.
func (o *objState) rewound(off int64) {
	for _, st := range o.h.streams {
		if st.from == o && !st.ended && st.off > off {
			st.fail(messages.Errorf(messages.ErrorCode_RESET, "%q on %s was rewound", o.id, o.h.name))
		}
	}
}

// readable is how many bytes a reader may take.
func (o *objState) readable() int64 {
	if o.held && !o.complete && o.size > 0 {
		return min(o.written, o.size-1)
	}
	return o.written
}

// advance records n more bytes and wakes the streams that wait for them.
func (o *objState) advance(n int64) error {
	if n <= 0 {
		return nil
	}
	if o.writer != nil {
		if err := o.writer.Advance(int(n)); err != nil {
			return err
		}
	}
	o.written += n
	o.wake()
	return nil
}

func (o *objState) wake() {
	ws := o.waiters
	o.waiters = nil
	for _, s := range ws {
		s.pump()
	}
}

// stream moves an object's bytes from a sender's copy to a receiver in
// chunks, as the data plane does: a chunk leaves as soon as the sender
// has it (so a partial copy relays what it receives: pipelining), and
// lands L after it left.
type stream struct {
	w        *world
	from     *objState
	src, dst *host
	off      int64
	size     int64
	fl       flow
	sending  int64
	ended    bool
	started  bool
	land     func(n int64, last bool) error
	end      func(err error)
	// cpu is what the receiver spends on each byte before it is readable
	// there (seconds per byte).
	cpu float64
	// chunk is what the stream moves at a time: the world's, or the one
	// a Get's directory shard chose for the tree's depth (limitChunk).
	chunk int64
}

// openStream starts a stream of size bytes of from's copy to dst, from
// offset off; the first byte leaves once the request reached the sender.
func (w *world) openStream(from *objState, dst *host, off, size int64, land func(int64, bool) error, end func(error)) *stream {
	open := w.p.requestLatency()
	if from.h == dst {
		open = 0
	}
	return w.openStreamAfter(open, from, dst, off, size, land, end)
}

// openStreamAfter is openStream whose first byte may leave after open.
func (w *world) openStreamAfter(open time.Duration, from *objState, dst *host, off, size int64, land func(int64, bool) error, end func(error)) *stream {
	s := &stream{w: w, from: from, src: from.h, dst: dst, off: off, size: size, land: land, end: end, cpu: w.p.ByteCost, chunk: w.chunk}
	s.fl.up, s.fl.down = &s.src.up, &dst.down
	s.fl.onChunkOut = s.chunkOut
	s.src.streams = append(s.src.streams, s)
	dst.streams = append(dst.streams, s)
	w.eng.after(open, func() {
		s.started = true
		if !s.src.alive {
			s.fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender %s is dead", s.src.name))
			return
		}
		s.pump()
	})
	return s
}

func (s *stream) pump() {
	if s.ended || !s.started || s.sending > 0 {
		return
	}
	if s.from.gone {
		s.fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q left %s", s.from.id, s.src.name))
		return
	}
	if s.off >= s.size {
		return
	}
	avail := s.from.readable() - s.off
	if avail <= 0 {
		if s.fl.on {
			s.w.net.removeFlow(&s.fl)
		}
		s.from.waiters = append(s.from.waiters, s)
		return
	}
	if s.src == s.dst {
		// A copy on the reader's own node: read from its store, no link.
		n := min(avail, s.size-s.off)
		s.sending = n
		s.w.eng.after(0, func() {
			s.sending = 0
			s.off += n
			last := s.off >= s.size
			s.landed(n, last)
			if !last {
				s.pump()
			}
		})
		return
	}
	n := min(s.chunk, avail, s.size-s.off)
	s.w.maxChunk = max(s.w.maxChunk, n)
	s.sending = n
	s.src.sent += n
	if s.fl.on {
		s.w.net.nextChunk(&s.fl, n)
		return
	}
	s.fl.remaining = float64(n) - s.w.net.take(s.fl.up, s.fl.down, n)
	s.w.net.addFlow(&s.fl)
}

// limitChunk has the stream move in chunks of at most shard bytes (a
// LocateReply's chunk, 0 for none), as an adapting member's reader
// does (storeactor's treeChunk); a fixed chunk (--chunk, a cluster's
// ChunkSize) stays.
func (s *stream) limitChunk(shard int64) {
	if s.w.fixedChunk || shard <= 0 || shard >= s.chunk {
		return
	}
	s.chunk = max(shard, plan.MinPipelineChunk)
}

func (s *stream) chunkOut() {
	n := s.sending
	s.sending = 0
	s.off += n
	last := s.off >= s.size
	s.w.eng.after(s.w.p.Latency, func() {
		if s.ended {
			return
		}
		s.w.work(s.dst, qData, time.Duration(float64(n)*s.cpu*float64(time.Second))+s.w.p.chunkCost(s.chunk), func() { s.landed(n, last) })
	})
	if last {
		s.w.net.removeFlow(&s.fl)
		return
	}
	s.pump()
}

// landed hands a chunk its receiver has taken in to the stream's reader.
func (s *stream) landed(n int64, last bool) {
	if s.ended {
		return
	}
	if err := s.land(n, last); err != nil {
		s.fail(err)
		return
	}
	if last {
		s.ended = true
		s.end(nil)
	}
}

// fail ends the stream early with err (reported to its receiver).
func (s *stream) fail(err error) {
	if s.ended {
		return
	}
	s.ended = true
	s.w.net.removeFlow(&s.fl)
	s.end(err)
}

// cut ends the stream early without a report (its receiver ended it).
func (s *stream) cut() {
	if s.ended {
		return
	}
	s.ended = true
	s.w.net.removeFlow(&s.fl)
}
