package fetchrun

import (
	"bytes"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// A broadcast simulated deterministically, like coordinator's
// TestReductionSimulated: many receivers, each a storeproto.FetchProtocol over a
// real objstore.Store, fetch objects through the real LocationTable, stepped by a
// seeded schedule of every event a real run produces: directory replies
// delayed, duplicated and reordered; a data plane that streams a sender's
// current bytes (a partial copy grows while it is read); creators that
// Put chunk by chunk; nodes that fail (their store is gone, the shard
// hears NodeFailed, their receivers see the stream break and/or the
// watch fire) and rejoin empty; stores small enough to evict; the shard
// restarting (its parked Locates fail UNAVAILABLE and it is rebuilt from
// what the nodes republish).
//
// Checked after every step: no receiver streams, directly or through its
// sender's sender, from itself; a protocol that waits has a timer (or a
// running stream, bounded by the stall timeout) that will wake it. At the
// end: no protocol is left waiting, every Get on a live node ended with
// the object's exact bytes or a typed *messages.Error, and each receiver
// moved at most size × (1 + failures it survived) bytes.

const (
	simChunk    = 1 << 10
	simStall    = 200 * time.Millisecond
	simTick     = 20 * time.Millisecond
	simHorizon  = 2 * time.Minute
	simInline   = 256
	simNodesMin = 4
)

type simEv struct {
	at  time.Time
	seq int
	do  func()
}

type simQueue []*simEv

func (q simQueue) Len() int { return len(q) }
func (q simQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q simQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *simQueue) Push(x any)   { *q = append(*q, x.(*simEv)) }
func (q *simQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type simNode struct {
	id    string
	ref   *messages.NodeRef
	inc   int // incarnation: messages to an older one are lost with it
	alive bool
	store *objstore.Store
	// fetches are the protocols in flight here, by object id.
	fetches map[string]*simFetch
	// toShard is when the last message from this node reaches the shard:
	// a node's messages arrive in order (one connection).
	toShard time.Time
}

type simFetch struct {
	node  *simNode
	inc   int
	id    string
	p     *Fetch
	timer *storeproto.FetchTimer // the newest timer armed
	// stream is the running copy (nil when none).
	stream   *simStream
	moved    int64
	failures int // sender failures survived
	ended    bool
}

type simStream struct {
	f      *simFetch
	cmd    *storeproto.StreamCommand
	sender string
	off    int64
	reader transport.ObjectReader
	cut    bool
	ended  bool
	idle   time.Time // last progress: a stall past simStall ends the copy
}

// simGet is one Get: what it must end with.
type simGet struct {
	node     *simNode
	inc      int
	id       string
	obj      *objstore.Object
	deadline time.Time
	answered bool
}

// simReplyTo is where a Locate's answer goes: the fetch that asked, as
// the real shard answers the asking session's PID (a later session of the
// same object on the same node does not get it).
type simReplyTo struct{ f *simFetch }

// simLocate is a Locate on its way, with the fetch that sent it.
type simLocate struct {
	m *messages.Locate
	f *simFetch
}

type fetchSim struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	now     time.Time
	q       simQueue
	seq     int
	table   *directory.LocationTable
	nodes   []*simNode
	byID    map[string]*simNode
	data    map[string][]byte
	creator map[string]string
	gets    []*simGet
	fetches []*simFetch
	log     []string
	// knobs of this seed
	dupP, failP, stragglerP float64
	capacity                int64
	restarts                int
	failed                  int
	stats                   *simStats
}

type simStats struct {
	retries, staleAttempt, seeds, gets, ok, typedErr, failovers, kills, rejoins, restarts, evictions, stale int
	codes                                                                                                   map[string]int
}

func (s *fetchSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf("%8.3fms ", float64(s.now.Sub(time.Unix(0, 0)))/1e6)+fmt.Sprintf(format, args...))
}

func (s *fetchSim) fail(format string, args ...any) {
	s.t.Helper()
	tail := s.log
	if len(tail) > 80 && os.Getenv("HOPLITE_FETCH_SIM_LOG") == "" {
		tail = tail[len(tail)-80:]
	}
	s.t.Fatalf("seed %d: %s\nrerun: HOPLITE_FETCH_SIM_SEED=%d go test -race -run TestFetchSimulated ./storenode/\nlast events:\n%s",
		s.seed, fmt.Sprintf(format, args...), s.seed, strings.Join(tail, "\n"))
}

func (s *fetchSim) at(d time.Duration, do func()) {
	s.seq++
	heap.Push(&s.q, &simEv{at: s.now.Add(d), seq: s.seq, do: do})
}

func (s *fetchSim) jitter(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
}

// toShard delivers a node's message to the shard, in order with the
// node's earlier ones.
func (s *fetchSim) toShard(n *simNode, msg any) {
	at := s.now.Add(s.jitter(0, 3*time.Millisecond))
	if !at.After(n.toShard) {
		at = n.toShard.Add(time.Nanosecond)
	}
	n.toShard = at
	s.seq++
	heap.Push(&s.q, &simEv{at: at, seq: s.seq, do: func() { s.shardStep(n, msg) }})
}

func (s *fetchSim) shardStep(from *simNode, msg any) {
	var out []outbox.Send
	switch m := msg.(type) {
	case simLocate:
		out = s.table.Step(s.now, directory.Locate{Req: m.m, ReplyTo: simReplyTo{f: m.f}}).Sends
		s.logf("shard <- %s Locate %s attempt %d failed=%s", from.id, m.m.GetObjectId(), m.m.GetAttempt(), m.m.GetFailedSender().GetNodeId())
	case *messages.CancelLocate:
		out = s.table.Step(s.now, m).Sends
	case *messages.FetchDone:
		out = s.table.Step(s.now, m).Sends
		s.logf("shard <- %s FetchDone %s", from.id, m.GetObjectId())
	case *messages.FetchAborted:
		out = s.table.Step(s.now, m).Sends
		s.logf("shard <- %s FetchAborted %s", from.id, m.GetObjectId())
	case *messages.PublishLocation:
		out = s.table.Step(s.now, m).Sends
	case *messages.UnpublishLocation:
		out = s.table.Step(s.now, m).Sends
		s.logf("shard <- %s Unpublish %s", from.id, m.GetObjectId())
	case *messages.CreateObject:
		out = s.table.Step(s.now, directory.Create{Req: m, ReplyTo: nil}).Sends
	case nodeFailedMsg:
		out = s.table.Step(s.now, directory.NodeFailed{Node: m.node}).Sends
		s.logf("shard <- NodeFailed %s", m.node)
	default:
		s.fail("shard got %T", msg)
	}
	s.shardOut(out)
}

// nodeFailedMsg is the shard's Terminated of a watched store node.
type nodeFailedMsg struct{ node string }

// shardOut delivers the shard's sends with delays that reorder them, and
// duplicates some.
func (s *fetchSim) shardOut(out []outbox.Send) {
	for _, o := range out {
		if r, ok := o.Msg.(*messages.LocateReply); ok {
			if to, ok := o.To.(simReplyTo); ok {
				s.logf("shard -> %s LocateReply %s attempt %d sender %s", to.f.node.id, to.f.id, r.GetAttempt(), r.GetSender().GetNodeId())
			}
		}
		copies := 1
		if s.rng.Float64() < s.dupP {
			copies = 2
		}
		for range copies {
			d := s.jitter(0, 4*time.Millisecond)
			if s.rng.Float64() < s.stragglerP {
				d = s.jitter(0, 300*time.Millisecond) // a straggler: overtaken by later replies
			}
			s.at(d, func() { s.nodeGets(o) })
		}
	}
}

func (s *fetchSim) nodeGets(o outbox.Send) {
	switch to := o.To.(type) {
	case simReplyTo:
		f, n := to.f, to.f.node
		if !n.alive || n.inc != f.inc {
			return
		}
		if f.ended {
			s.stats.stale++ // to a session that has stopped: a dead letter
			return
		}
		r := o.Msg.(*messages.LocateReply)
		if f.p.Waiting() == "locate" && r.GetAttempt() != f.p.Protocol().Attempt() {
			s.stats.staleAttempt++
		}
		s.logf("%s <- LocateReply %s attempt %d sender %s err %v", n.id, f.id, r.GetAttempt(), r.GetSender().GetNodeId(), r.GetError())
		s.step(f, f.p.Located(r, s.now))
	case *messages.NodeRef:
		n := s.byID[to.GetNodeId()]
		if !n.alive {
			return
		}
		switch m := o.Msg.(type) {
		case *messages.DropObject:
			reason := m.GetReason()
			if reason == nil {
				reason = messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", m.GetObjectId())
			}
			n.store.Remove(m.GetObjectId(), reason)
			s.logf("%s <- DropObject %s %v", n.id, m.GetObjectId(), reason)
		default:
			s.fail("node %s got %T from the shard", n.id, o.Msg)
		}
	case nil:
	default:
		s.fail("shard sent to %T", o.To)
	}
}

// step carries out one step of a receiver's protocol, then checks it.
func (s *fetchSim) step(f *simFetch, out storeproto.FetchOutput) {
	n := f.node
	for _, snd := range out.Sends {
		if _, ok := snd.To.(directory.ShardOf); !ok {
			s.fail("fetch %s@%s sent to %T", f.id, n.id, snd.To)
		}
		if l, ok := snd.Msg.(*messages.Locate); ok {
			s.toShard(n, simLocate{m: l, f: f})
		} else {
			s.toShard(n, snd.Msg)
		}
		if _, ok := snd.Msg.(*messages.UnpublishLocation); ok {
			s.stats.evictions++
		}
	}
	for _, t := range out.Timers {
		ft := t.Msg.(storeproto.FetchTimer)
		f.timer = &ft
		if t.At.Before(s.now) {
			s.fail("fetch %s@%s armed a timer in the past", f.id, n.id)
		}
		s.at(t.At.Sub(s.now), func() {
			if n.alive && n.inc == f.inc && !f.ended {
				if ft.Kind == storeproto.TimerRetry && ft.Attempt == f.p.Protocol().Attempt() {
					s.stats.retries++
				}
				s.step(f, f.p.Timer(ft, s.now))
			}
		})
	}
	if out.Cut != 0 && f.stream != nil && f.stream.cmd.ID == out.Cut {
		f.stream.cut = true
	}
	if out.Failure() != nil {
		f.failures++
		s.stats.failovers++
	}
	if out.Stream != nil {
		if f.stream != nil && !f.stream.ended {
			s.fail("fetch %s@%s started stream %d while stream %d runs", f.id, n.id, out.Stream.ID, f.stream.cmd.ID)
		}
		st := &simStream{f: f, cmd: out.Stream, sender: out.Stream.Sender.GetNodeId(), off: out.Stream.Offset, idle: s.now}
		f.stream = st
		s.logf("%s streams %s from %s at %d", n.id, f.id, st.sender, st.off)
		s.checkNoCycle(f)
		s.at(s.jitter(0, time.Millisecond), func() { s.pump(st) })
	}
	if out.Done {
		f.ended = true
		delete(n.fetches, f.id)
		s.logf("%s fetch %s done: %v", n.id, f.id, out.Err)
		if out.Err != nil {
			var me *messages.Error
			if !errors.As(out.Err, &me) {
				s.fail("fetch %s@%s ended with an untyped error %T %v", f.id, n.id, out.Err, out.Err)
			}
			if errors.Is(out.Err, messages.ErrTimeout) && s.now.Before(f.p.Protocol().Deadline()) {
				s.fail("fetch %s@%s timed out %v before its Gets' deadline", f.id, n.id, f.p.Protocol().Deadline().Sub(s.now))
			}
		}
		return
	}
	s.checkArmed(f)
}

// checkArmed: a protocol that waits has something that will wake it.
func (s *fetchSim) checkArmed(f *simFetch) {
	switch f.p.Waiting() {
	case "locate":
		if f.timer == nil || f.timer.Attempt != f.p.Protocol().Attempt() || f.timer.Kind != storeproto.TimerLocateDeadline {
			s.fail("fetch %s@%s locates (attempt %d) without a deadline timer (%+v)", f.id, f.node.id, f.p.Protocol().Attempt(), f.timer)
		}
	case "backoff":
		if f.timer == nil || f.timer.Attempt != f.p.Protocol().Attempt() || f.timer.Kind != storeproto.TimerRetry {
			s.fail("fetch %s@%s backs off without a retry timer", f.id, f.node.id)
		}
	case "stream":
		if f.stream == nil || f.stream.ended || f.stream.cmd.ID != f.p.Protocol().Stream() {
			s.fail("fetch %s@%s streams without a running copy", f.id, f.node.id)
		}
	case "":
		if !f.p.Done() {
			s.fail("fetch %s@%s waits for nothing", f.id, f.node.id)
		}
	}
}

// checkNoCycle follows the streams upstream of f's receiver.
func (s *fetchSim) checkNoCycle(f *simFetch) {
	seen := map[string]bool{f.node.id: true}
	chain := []string{f.node.id}
	cur := f
	for cur != nil && cur.stream != nil && !cur.stream.ended {
		up := cur.stream.sender
		chain = append(chain, up)
		if seen[up] {
			s.fail("object %s: a cycle of streams %v", f.id, chain)
		}
		seen[up] = true
		un := s.byID[up]
		if un == nil || !un.alive {
			return
		}
		cur = un.fetches[f.id]
	}
}

// pump moves the bytes the sender has now, one chunk per call.
func (s *fetchSim) pump(st *simStream) {
	f := st.f
	n := f.node
	if st.ended || !n.alive || n.inc != f.inc {
		return
	}
	end := func(err error) {
		st.ended = true
		if st.reader != nil {
			st.reader.Close()
		}
		s.logf("%s stream %s from %s ended at %d: %v", n.id, f.id, st.sender, st.off, err)
		s.step(f, f.p.StreamEnded(st.cmd.ID, err, s.now))
	}
	if st.cut {
		end(messages.ErrCanceled)
		return
	}
	if s.now.Sub(st.idle) >= simStall {
		end(messages.Errorf(messages.ErrorCode_TIMEOUT, "stalled"))
		return
	}
	sn := s.byID[st.sender]
	if !sn.alive {
		end(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "connection to %s reset", st.sender))
		return
	}
	if st.reader == nil {
		src := sn.store.Lookup(f.id)
		if src == nil {
			end(messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on %s", f.id, st.sender))
			return
		}
		if src.Size() >= 0 {
			r, err := sn.store.OpenObject(context.Background(), f.id)
			if err != nil {
				end(err)
				return
			}
			st.reader = r
		}
	}
	if st.reader != nil {
		done, cancel := context.WithCancel(context.Background())
		cancel() // never wait: no bytes yet means try again later
		b, err := st.reader.ReadAt(done, st.off, simChunk)
		switch {
		case errors.Is(err, io.EOF):
			end(nil)
			return
		case errors.Is(err, messages.ErrCanceled):
		case err != nil:
			end(err)
			return
		default:
			if err := st.f.p.Writer().Append(b); err != nil {
				end(err)
				return
			}
			st.off += int64(len(b))
			f.moved += int64(len(b))
			st.idle = s.now
			if st.off == st.reader.Size() {
				end(nil)
				return
			}
		}
	}
	s.checkNoCycle(f)
	s.at(s.jitter(200*time.Microsecond, 2*time.Millisecond), func() { s.pump(st) })
}

// get is a Get of id on n: it joins the fetch there or starts one.
func (s *fetchSim) get(n *simNode, id string, timeout time.Duration) {
	if !n.alive {
		return
	}
	obj, created := n.store.Reserve(id)
	deadline := s.now.Add(timeout)
	s.gets = append(s.gets, &simGet{node: n, inc: n.inc, id: id, obj: obj, deadline: deadline})
	s.stats.gets++
	if !created {
		if f := n.fetches[id]; f != nil {
			f.p.Extend(deadline)
		}
		return
	}
	f := &simFetch{node: n, inc: n.inc, id: id}
	f.p = NewFetch(storeproto.FetchConfig{Self: n.ref, Grace: simStall,
		Rand: rand.New(rand.NewPCG(s.seed, uint64(len(s.fetches))))}, n.store, obj, deadline, nil)
	n.fetches[id] = f
	s.fetches = append(s.fetches, f)
	s.logf("%s Get %s (deadline %v)", n.id, id, timeout)
	s.step(f, f.p.Start(s.now))
}

// put creates id on n and copies its bytes in chunk by chunk.
func (s *fetchSim) put(n *simNode, id string) {
	if !n.alive {
		return
	}
	data := s.data[id]
	fp := fingerprint.Of(data)
	obj, evicted, err := n.store.Create(id, int64(len(data)), fp)
	if err != nil {
		s.fail("put %s on %s: %v", id, n.id, err)
	}
	for _, e := range evicted {
		s.toShard(n, &messages.UnpublishLocation{ObjectId: e, Node: n.ref})
	}
	create := &messages.CreateObject{ObjectId: id, Size: int64(len(data)), Fingerprint: fp, Creator: n.ref}
	if int64(len(data)) < simInline {
		create.HasInline, create.InlineData = true, data
	}
	s.toShard(n, create)
	s.logf("%s Put %s (%d bytes)", n.id, id, len(data))
	inc := n.inc
	var copyIn func(off int)
	copyIn = func(off int) {
		if !n.alive || n.inc != inc {
			return
		}
		if off >= len(data) {
			if err := n.store.Complete(obj); err != nil {
				return
			}
			s.toShard(n, &messages.PublishLocation{ObjectId: id, Node: n.ref, State: messages.LocationState_COMPLETE,
				Size: int64(len(data)), Fingerprint: fp, Creator: true})
			return
		}
		if err := obj.Append(data[off:min(len(data), off+simChunk)]); err != nil {
			return
		}
		s.at(s.jitter(100*time.Microsecond, 1500*time.Microsecond), func() { copyIn(off + simChunk) })
	}
	copyIn(0)
}

// kill fails n: its store and protocols are gone; the shard hears of it
// after the node's last messages, the receivers it served see their
// streams break and their watches fire, in an order the seed picks.
func (s *fetchSim) kill(n *simNode) {
	if !n.alive {
		return
	}
	n.alive = false
	s.stats.kills++
	s.failed++
	s.logf("KILL %s", n.id)
	n.store.Clear(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "node %s failed", n.id))
	s.toShard(n, nodeFailedMsg{node: n.id})
	for _, f := range s.fetches {
		if f.ended || f.stream == nil || f.stream.ended || f.stream.sender != n.id {
			continue
		}
		f := f
		s.at(s.jitter(0, 5*time.Millisecond), func() {
			if f.node.alive && f.node.inc == f.inc && !f.ended {
				s.step(f, f.p.SenderFailed(n.id))
			}
		})
	}
}

// rejoin brings n back as a new, empty incarnation, which Gets again.
func (s *fetchSim) rejoin(n *simNode, ids []string) {
	if n.alive {
		return
	}
	n.inc++
	n.alive = true
	n.store = objstore.NewStore(s.capacity)
	n.fetches = map[string]*simFetch{}
	s.stats.rejoins++
	s.logf("REJOIN %s", n.id)
	for _, id := range ids {
		if s.rng.IntN(2) == 0 {
			s.at(s.jitter(0, 20*time.Millisecond), func() { s.get(n, id, s.jitter(200*time.Millisecond, 2*time.Second)) })
		}
	}
}

// restartShard loses the table: parked Locates fail UNAVAILABLE, and the
// new table learns the copies from the live nodes' republication.
func (s *fetchSim) restartShard() {
	s.stats.restarts++
	s.restarts++
	s.logf("SHARD RESTART")
	s.shardOut(s.table.Step(s.now, directory.FailWaiters{Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard restarting")}).Sends)
	cfg := directory.DefaultTableConfig()
	cfg.InlineLimit = simInline
	cfg.Amnesic = true
	cfg.Instance = uint32(s.restarts) // a new table, as the shard's (its epochs are its own)
	s.table = directory.NewLocationTable(cfg)
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		for _, o := range n.store.Objects() {
			if pub, ok := o.Publication(n.ref); ok {
				s.toShard(n, pub)
			}
		}
	}
}

func (s *fetchSim) tick() {
	s.shardOut(s.table.Step(s.now, directory.Tick{At: s.now}).Sends)
	if s.now.Before(time.Unix(0, 0).Add(simHorizon)) && s.active() {
		s.at(simTick, s.tick)
	}
}

func (s *fetchSim) active() bool {
	for _, f := range s.fetches {
		if !f.ended && f.node.alive && f.node.inc == f.inc {
			return true
		}
	}
	return len(s.q) > 0
}

func runFetchSim(t *testing.T, seed uint64, stats *simStats) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	s := &fetchSim{t: t, seed: seed, rng: rng, now: time.Unix(0, 0), byID: map[string]*simNode{},
		data: map[string][]byte{}, creator: map[string]string{}, stats: stats}
	cfg := directory.DefaultTableConfig()
	cfg.InlineLimit = simInline
	s.table = directory.NewLocationTable(cfg)
	nNodes := simNodesMin + rng.IntN(9)
	nObjects := 1 + rng.IntN(3)
	s.dupP = []float64{0, 0.1, 0.3}[rng.IntN(3)]
	s.failP = []float64{0, 0.2, 0.5}[rng.IntN(3)]
	s.stragglerP = []float64{0, 0.1, 0.5}[rng.IntN(3)]
	var biggest int64
	ids := make([]string, nObjects)
	for i := range ids {
		ids[i] = fmt.Sprintf("obj%d", i)
		size := 1 + rng.IntN(40*simChunk)
		if rng.IntN(8) == 0 {
			size = rng.IntN(simInline) // inline in the directory
		}
		data := make([]byte, size)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		s.data[ids[i]] = data
		biggest = max(biggest, int64(size))
	}
	// Small stores evict: room for the biggest object and a bit.
	s.capacity = biggest * int64(1+rng.IntN(nObjects+1))
	s.capacity = max(s.capacity, biggest)
	for i := range nNodes {
		id := fmt.Sprintf("n%d", i)
		n := &simNode{id: id, ref: &messages.NodeRef{NodeId: id, Address: "sim", ActorId: id + "/store", DataAddress: "mem://" + id},
			alive: true, store: objstore.NewStore(s.capacity * int64(len(ids))), fetches: map[string]*simFetch{}}
		if i > 0 {
			n.store = objstore.NewStore(s.capacity)
		}
		s.nodes = append(s.nodes, n)
		s.byID[id] = n
	}
	// n0 creates every object (its store holds them all: creators' copies
	// are pinned); the Puts start at random times.
	putLate := []time.Duration{10 * time.Millisecond, 300 * time.Millisecond}[rng.IntN(2)]
	for _, id := range ids {
		s.creator[id] = "n0"
		s.at(s.jitter(0, putLate), func() { s.put(s.nodes[0], id) })
	}
	// Receivers Get at random times, some before the Put.
	for _, n := range s.nodes[1:] {
		for _, id := range ids {
			if rng.IntN(4) == 0 {
				continue
			}
			// Several Gets of one object on one node: the later ones
			// extend the fetch's deadline.
			for range 1 + rng.IntN(3) {
				s.at(s.jitter(0, 400*time.Millisecond), func() { s.get(n, id, s.jitter(50*time.Millisecond, 3*time.Second)) })
			}
		}
	}
	// Failures and rejoins of receivers; rarely of the creator.
	for _, n := range s.nodes {
		p := s.failP
		if n.id == "n0" {
			p /= 4
		}
		if rng.Float64() < p {
			at := s.jitter(time.Millisecond, 80*time.Millisecond)
			s.at(at, func() { s.kill(n) })
			if n.id != "n0" && rng.IntN(2) == 0 {
				s.at(at+s.jitter(time.Millisecond, 100*time.Millisecond), func() { s.rejoin(n, ids) })
			}
		}
	}
	if rng.IntN(6) == 0 {
		s.at(s.jitter(time.Millisecond, 60*time.Millisecond), s.restartShard)
	}
	s.at(simTick, s.tick)

	steps := 0
	for len(s.q) > 0 {
		e := heap.Pop(&s.q).(*simEv)
		s.now = e.at
		if s.now.After(time.Unix(0, 0).Add(simHorizon)) {
			s.fail("still running at %v of simulated time", simHorizon)
		}
		e.do()
		s.answerGets()
		if steps++; steps > 2_000_000 {
			s.fail("more than %d events", steps)
		}
	}
	s.finalChecks()
}

// answerGets answers the Gets whose object completed or failed, or whose
// deadline passed, as the store node does: the bytes must be the Put's,
// an error must be typed, and without any fault only an eviction or a
// full store may fail a Get.
func (s *fetchSim) answerGets() {
	for _, g := range s.gets {
		if g.answered || !g.node.alive || g.node.inc != g.inc {
			continue
		}
		_, done, err := g.obj.Progress()
		switch {
		case err != nil:
			g.answered = true
			var me *messages.Error
			if !errors.As(err, &me) {
				s.fail("Get %s@%s ended with an untyped error %T %v", g.id, g.node.id, err, err)
			}
			s.stats.typedErr++
			s.stats.codes[me.GetCode().String()]++
			if s.failed == 0 && s.restarts == 0 && !errors.Is(err, messages.ErrCapacity) &&
				!(errors.Is(err, messages.ErrTimeout) && !s.now.Before(g.deadline)) {
				s.fail("Get %s@%s failed without any fault: %v", g.id, g.node.id, err)
			}
		case done:
			g.answered = true
			b, berr := g.obj.Bytes()
			if berr != nil || !bytes.Equal(b, s.data[g.id]) {
				s.fail("Get %s@%s: other bytes than were Put (%v)", g.id, g.node.id, berr)
			}
			s.stats.ok++
		case !s.now.Before(g.deadline):
			g.answered = true
			s.stats.typedErr++
			s.stats.codes["TIMEOUT (Get)"]++
		}
	}
}

func (s *fetchSim) finalChecks() {
	for _, f := range s.fetches {
		if !f.node.alive || f.node.inc != f.inc {
			continue
		}
		if !f.ended {
			s.fail("fetch %s@%s never ended: %s", f.id, f.node.id, f.p)
		}
		size := int64(len(s.data[f.id]))
		if limit := size * int64(1+f.failures); f.moved > limit {
			s.fail("fetch %s@%s moved %d bytes of a %d-byte object after %d failures", f.id, f.node.id, f.moved, size, f.failures)
		}
	}
	for _, g := range s.gets {
		if !g.answered && g.node.alive && g.node.inc == g.inc {
			// Its deadline is past the last event: the object must have
			// settled by now, or nothing would ever answer it.
			s.fail("Get %s@%s: the object is neither complete nor failed when nothing is left to happen", g.id, g.node.id)
		}
	}
}

// TestFetchSimulated runs many seeded broadcast schedules
// (HOPLITE_FETCH_SIM_SEEDS sets how many; HOPLITE_FETCH_SIM_SEED replays
// one).
func TestFetchSimulated(t *testing.T) {
	seeds := []uint64{}
	n := 300
	if v := os.Getenv("HOPLITE_FETCH_SIM_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			t.Fatalf("HOPLITE_FETCH_SIM_SEEDS=%q: want a number of seeds", v)
		}
	}
	if v := os.Getenv("HOPLITE_FETCH_SIM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HOPLITE_FETCH_SIM_SEED=%q", v)
		}
		seeds = append(seeds, s)
	} else {
		for i := range n {
			seeds = append(seeds, uint64(i+1))
		}
	}
	stats := &simStats{codes: map[string]int{}}
	for _, seed := range seeds {
		runFetchSim(t, seed, stats)
		stats.seeds++
	}
	t.Logf("%d seeds: %d Gets, %d exact, %d typed errors %v; %d failovers, %d kills, %d rejoins, %d shard restarts, %d evictions, %d replies to ended fetches, %d to an older attempt, %d retries after UNAVAILABLE",
		stats.seeds, stats.gets, stats.ok, stats.typedErr, stats.codes, stats.failovers, stats.kills, stats.rejoins, stats.restarts, stats.evictions, stats.stale, stats.staleAttempt, stats.retries)
	if len(seeds) >= 100 && (stats.failovers == 0 || stats.evictions == 0 || stats.ok == 0 || stats.retries == 0 || stats.staleAttempt == 0) {
		t.Fatalf("the schedules missed a path: %d failovers, %d evictions, %d exact Gets, %d retries, %d stale replies",
			stats.failovers, stats.evictions, stats.ok, stats.retries, stats.staleAttempt)
	}
}

// TestFetchSimulatedRegressions replays the seeds that found bugs, whatever
// the default run's seeds become: 673 (a receiver naming a live, stalled
// sender failed removed it from the directory, which forgot its upstream
// and offered a copy downstream of the asker: a cycle of four streams) and
// 8750 (a partial copy republished after a shard restart was offered
// although its sender, answered before the restart, was fed by the asker).
func TestFetchSimulatedRegressions(t *testing.T) {
	stats := &simStats{codes: map[string]int{}}
	for _, seed := range []uint64{673, 8750} {
		runFetchSim(t, seed, stats)
	}
}
