package reduction

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

func allReduceRequest(sources []string) *messages.Reduce {
	r := request(sources, len(sources))
	r.AllReduce = true
	return r
}

// TestSlicedChosenByCostModel: an AllReduce of every source takes the
// shape the cost model prices lower, and reports both prices; a Reduce,
// an AllReduce of fewer than all sources, a forced d-ary shape, or
// slices under Config.MinSlice (unless forced) never slices.
func TestSlicedChosenByCostModel(t *testing.T) {
	// 64 MiB: at the tests' 10 Gbit/s a smaller object's bytes weigh
	// less than the sliced shape's coordinator (plan.CoordMessageCPU).
	const big = int64(64 << 20)
	cases := []struct {
		name   string
		req    *messages.Reduce
		cfg    Config
		size   int64
		sliced bool
	}{
		{"allreduce 64 MiB of 4", allReduceRequest(ids("s", 4)), Config{}, big, true},
		{"allreduce 64 MiB of 8 (its unpaced streams' contention)", allReduceRequest(ids("s", 8)), Config{}, big, false},
		{"allreduce 64 MiB of 8, paced", allReduceRequest(ids("s", 8)), Config{Paced: true}, big, true},
		{"allreduce 1 MiB of 8, paced (its coordinator's messages)", allReduceRequest(ids("s", 8)), Config{Paced: true}, bigSize, false},
		{"allreduce just above the inline limit", allReduceRequest(ids("s", 2)), Config{}, testInline + 8, false},
		{"reduce", request(ids("s", 8), 8), Config{}, big, false},
		{"allreduce of 6 of 8", func() *messages.Reduce { r := allReduceRequest(ids("s", 8)); r.NumObjects = 6; return r }(), Config{}, big, false},
		{"forced d-ary", allReduceRequest(ids("s", 8)), Config{AllReduceShape: ShapeDAry}, big, false},
		{"forced degree", allReduceRequest(ids("s", 8)), Config{ForceDegree: 2}, big, false},
		{"forced sliced just above the inline limit", allReduceRequest(ids("s", 2)), Config{AllReduceShape: ShapeSliced}, testInline + 8, true},
		{"allreduce 64 MiB of 4, slices at MinSlice", allReduceRequest(ids("s", 4)), Config{MinSlice: big / 4}, big, true},
		{"allreduce 64 MiB of 4, slices under MinSlice", allReduceRequest(ids("s", 4)), Config{MinSlice: big/4 + 1}, big, false},
		{"forced sliced, slices under MinSlice", allReduceRequest(ids("s", 4)), Config{AllReduceShape: ShapeSliced, MinSlice: big}, big, true},
	}
	for _, c := range cases {
		r := newRed(c.req, c.cfg)
		r.Step(t0, Begin{})
		r.Step(t0, located("s0", c.size, node(0)))
		if got := r.plan.GetShape() == ShapeSliced; got != c.sliced {
			t.Errorf("%s: shape %q, want sliced %v", c.name, r.plan.GetShape(), c.sliced)
		}
		if !c.req.GetAllReduce() || c.req.GetNumObjects() != int32(len(c.req.GetSourceIds())) || c.cfg.AllReduceShape == ShapeDAry || c.cfg.ForceDegree > 0 {
			continue
		}
		// The plan's prices are the model's at the L and B it used.
		ch := plan.ChooseAllReduce(len(c.req.GetSourceIds()), time.Duration(r.plan.GetLatencyNs()), r.plan.GetBandwidth(), c.size, 8, len(c.req.GetSourceIds()), c.cfg.Paced)
		want := []*messages.ShapeCost{{Shape: ShapeSliced, CostUs: ch.SlicedCost.Microseconds()}, {Shape: ShapeDAry, CostUs: ch.ReduceBroadcastCost.Microseconds()}}
		if fmt.Sprint(r.plan.GetShapeCosts()) != fmt.Sprint(want) {
			t.Errorf("%s: shape costs %v, want %v", c.name, r.plan.GetShapeCosts(), want)
		}
		if (c.cfg == Config{} || c.cfg == Config{Paced: true}) && c.sliced != ch.Sliced {
			t.Errorf("%s: the model says sliced %v", c.name, ch.Sliced)
		}
	}
}

// TestSlicedTasks drives a sliced AllReduce of 3 sources by hand, its
// gathers fetching every slice from its root (NoRingGather; the ring's
// relays: TestSlicedRingTasks): the rotated chains, their slices, the
// gathers, and the publications, creator first, before the answer.
func TestSlicedTasks(t *testing.T) {
	const n = 3
	size := int64(3*(1<<15)+1) * 8 // int64: 98305 elements, the first slice one longer
	cut := plan.Slices(size, n, 8)
	r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced, NoRingGather: true})
	r.start = node(2) // the caller's node holds s2: it creates the target
	r.Step(t0, Begin{})
	var tasks []Task
	for i := 0; i < n; i++ {
		tasks = append(tasks, r.Step(t0, located(fmt.Sprintf("s%d", i), size, node(i))).Tasks()...)
	}
	// Every task goes out once every source is there: n chains of n,
	// then the gathers (positions n·n on; batched per node, see
	// TestSlicedTasksBatched). Slice k's chain starts at participant k+1 and
	// ends (its root) at participant k; each link reads its predecessor.
	if len(tasks) != n*n+n {
		t.Fatalf("%d tasks after every arrival, want %d", len(tasks), n*n+n)
	}
	tasks = byPosition(tasks)
	for p, tk := range tasks[:n*n] {
		task := tk.Task
		k, c := p/n, p%n
		if int(task.GetPosition()) != p || tk.Node.GetNodeId() != fmt.Sprintf("n%d", (k+1+c)%n) || !task.GetSliced() ||
			task.GetSourceId() != fmt.Sprintf("s%d", (k+1+c)%n) || task.GetSourceOffset() != cut[k].Off || task.GetSize() != cut[k].Len ||
			task.GetRoot() || task.GetOutputId() != InternalID(testReduceID, p, 1) {
			t.Fatalf("chain position %d: %v on %s", p, task, tk.Node.GetNodeId())
		}
		// Only a chain's last position reports its success (and its
		// link measured): the others' reports would tell nothing.
		if task.GetQuiet() != (c < n-1) {
			t.Fatalf("chain position %d (link %d of %d): quiet %v", p, c, n, task.GetQuiet())
		}
		switch kids := task.GetChildren(); {
		case c == 0 && len(kids) != 0:
			t.Fatalf("leaf %d reads %v", p, kids)
		case c > 0 && (len(kids) != 1 || kids[0].GetObjectId() != InternalID(testReduceID, p-1, 1) || kids[0].GetNode().GetNodeId() != fmt.Sprintf("n%d", (k+c)%n)):
			t.Fatalf("link %d reads %v", p, kids)
		}
	}
	gathers := tasks[n*n:]
	if r.plan.GetRingGather() {
		t.Fatal("NoRingGather: the plan says the all-gather went around the ring")
	}
	// A started report changes nothing; a failed one fails the AllReduce.
	for _, tk := range tasks {
		if fx := r.Step(t0, started(int(tk.Task.GetPosition()))); len(fx.Sends) != 0 {
			t.Fatalf("p%d started: %v", tk.Task.GetPosition(), fx.Sends)
		}
	}
	if len(gathers) != n || gathers[0].Node.GetNodeId() != "n2" || !gathers[0].Task.GetRoot() {
		t.Fatalf("gathers %v: want 3, the caller's node's first and the creator", gathers)
	}
	for _, g := range gathers {
		if g.Task.GetQuiet() {
			t.Fatalf("gather p%d is quiet: the AllReduce answers on the gathers' reports", g.Task.GetPosition())
		}
	}
	for _, g := range gathers {
		for k, in := range g.Task.GetChildren() {
			if in.GetOffset() != cut[k].Off || in.GetNode().GetNodeId() != fmt.Sprintf("n%d", k) || in.GetObjectId() != InternalID(testReduceID, k*n+n-1, 1) {
				t.Fatalf("gather input %d: %v", k, in)
			}
		}
	}
	for i, g := range gathers {
		m := done(int(g.Task.GetPosition()))
		m.Fingerprint = 0xfeed
		fx := r.Step(t0, m)
		if i < n-1 {
			if fx.Reply() != nil {
				t.Fatal("answered before every gather was done")
			}
			continue
		}
		var pubs []*messages.PublishLocation
		for _, s := range fx.Sends {
			if m, ok := s.Msg.(*messages.PublishLocation); ok {
				pubs = append(pubs, m)
			}
		}
		if len(pubs) != n || !pubs[0].GetCreator() || pubs[0].GetNode().GetNodeId() != "n2" || pubs[1].GetCreator() || pubs[0].GetFingerprint() != 0xfeed {
			t.Fatalf("publications %v", pubs)
		}
		// Every gather's node completes its copy on its commit, which
		// comes before the release that keeps it (one node's messages
		// arrive in order): until then a Get there could return a run
		// that a participant's failure abandons.
		committed := map[string]int{}
		for j, s := range fx.Sends {
			node, _ := s.To.(*messages.NodeRef)
			switch m := s.Msg.(type) {
			case *messages.ReduceCommit:
				if m.GetTargetId() != testTarget || m.GetGeneration() != 1 {
					t.Fatalf("commit %v", m)
				}
				committed[node.GetNodeId()] = j
			case *messages.ReduceRelease:
				if at, ok := committed[node.GetNodeId()]; !ok || at > j {
					t.Fatalf("the release to %s comes before its commit (sends %v)", node.GetNodeId(), fx.Sends)
				}
			}
		}
		if len(committed) != n {
			t.Fatalf("commits to %v, want every gather's node", committed)
		}
		// It answers once every gather's node says its copy is whole (its
		// Get of the result, sent after its commit).
		asked := nodeIDs(fx.Fetch())
		if slices.Sort(asked); !slices.Equal(asked, []string{"n0", "n1", "n2"}) || fx.Reply() != nil {
			t.Fatalf("Gets of the result on %v, reply %v; want every gather's node asked first", asked, fx.Reply())
		}
		for j, node := range asked {
			fx = r.Step(t0, Fetched{Node: node, Err: nil})
			if (fx.Reply() != nil) != (j == len(asked)-1) {
				t.Fatalf("%s's copy is whole: reply %v", node, fx.Reply())
			}
		}
		if rep := fx.Reply(); rep.GetError() != nil || !slices.Equal(rep.GetReducedIds(), ids("s", n)) || !fx.ReleaseKeep() {
			t.Fatalf("reply %v", rep)
		}
	}
}

// The sliced AllReduce simulated: arrivals, node failures at any moment
// (before the chains start, during the reduce-scatter, during the
// gather), what the source's shard says after a failure, in its order (a
// stale location of the dead node's copy, sent before the failure; the
// object LOST, unless the shard restarted and forgot; a fresh Put's
// location), worker reports and the participants' Gets, in an order a
// seed picks. Workers compute what their outputs hold, as counts of
// (source, slice) pairs, so exactness is checked, not assumed. A
// released worker says nothing new, but a report it sent before its
// release may still arrive.
//
// Liveness: when nothing is left to happen, the Reduction has answered,
// or fewer sources than it needs exist, one of the lost ones was never
// reported lost, and its deadline fails it with TIMEOUT. Safety: a
// success holds every source of ReducedIds exactly once in every slice,
// ReducedIds and UnreducedIds split the request, and every participant
// alive at the end holds the result or was asked to fetch it; a sliced
// run abandoned after it started released every surviving participant
// and dropped every gather's copy.
func TestSlicedSimulated(t *testing.T) {
	seeds := simSeeds(t)
	seeds = seeds[:min(len(seeds), 2000)]
	outcomes := map[string]int{}
	for _, seed := range seeds {
		outcomes[runSlicedSim(t, seed)]++
		if t.Failed() {
			return
		}
	}
	t.Logf("outcomes %v", outcomes)
	// The schedules must reach every ending, or they check little.
	if len(seeds) > 100 {
		for _, o := range []string{"sliced", "replanned before the chains", "replanned while running", "replanned again in the tree",
			"d-ary", "d-ary, n lowered", "LOST: every source lost", "TIMEOUT", "n lowered before the first arrival"} {
			if outcomes[o] == 0 {
				t.Fatalf("outcomes %v: none %q", outcomes, o)
			}
		}
	}
}

type slicedWorker struct {
	task     *messages.ReduceTask
	node     string
	started  bool
	done     bool
	released bool
	value    map[string]int // (source@slice offset) -> times reduced in
}

type slicedEvent struct {
	what  string // arrive, fail, stale, lost, started, done, fetched
	id    string
	node  string
	w     *slicedWorker
	value map[string]int // done: what the worker read while its inputs were there
	// then: events that follow this one from the same sender (a shard's
	// messages to the coordinator keep their order); the first is queued
	// when this one is delivered.
	then []slicedEvent
}

type slicedSim struct {
	t        *testing.T
	rng      *rand.Rand
	r        *Reduction
	n        int
	offs     []int64
	alive    map[string]bool
	home     map[string]string        // source -> the node its live copy is on
	outputs  map[string]*slicedWorker // output id -> the worker that writes it
	workers  []*slicedWorker
	events   []slicedEvent
	dropped  map[string]bool // nodes whose copy of the target was dropped
	released map[string]bool // nodes told to stop an abandoned run
	fetch    map[string]bool // nodes asked to Get the result
	result   *slicedWorker   // the root whose Done fixed a tree's result
	reply    *messages.ReduceReply
	replans  int             // AllReduceReplanned events: the sliced run's, then the tree's
	reported map[string]bool // sources the directory reported lost
	log      []string
}

// chain queues evs in their order (see slicedEvent.then).
func (s *slicedSim) chain(evs []slicedEvent) {
	if len(evs) > 0 {
		head := evs[0]
		head.then = evs[1:]
		s.events = append(s.events, head)
	}
}

func (s *slicedSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

// full is what the reduction of ids holds: each source once in each slice.
func (s *slicedSim) full(ids []string) map[string]int {
	v := map[string]int{}
	for _, id := range ids {
		for _, off := range s.offs {
			v[fmt.Sprintf("%s@%d", id, off)]++
		}
	}
	return v
}

func (s *slicedSim) apply(fx Effects) {
	checkShapes(s.t, s.r)
	for _, e := range fx.Events {
		if ev, ok := e.(*events.AllReduceReplanned); ok {
			s.replans++
			s.logf("replanned from %s to %d sources", ev.From, ev.Num)
		}
	}
	if rep := fx.Reply(); rep != nil {
		if s.reply != nil {
			s.t.Fatalf("a second reply %v", rep)
		}
		s.reply = rep
		s.logf("reply %v", rep)
	}
	// In order: a release or drop sent before a task reaches its node first.
	for _, snd := range fx.Sends {
		to, _ := snd.To.(*messages.NodeRef)
		switch m := snd.Msg.(type) {
		case *messages.DropObject:
			if m.GetObjectId() == testTarget {
				s.dropped[to.GetNodeId()] = true
			}
		case *messages.ReduceRelease:
			if !m.GetKeepTarget() && s.reply == nil {
				s.released[to.GetNodeId()] = true
				for _, w := range s.workers {
					if w.node == to.GetNodeId() {
						w.released = true
					}
				}
				s.logf("release %s", to.GetNodeId())
			}
		case *messages.ReduceInvalidate:
			for _, w := range s.workers {
				if w.node == to.GetNodeId() && w.task.GetPosition() == m.GetPosition() && w.task.GetGeneration() == m.GetGeneration() {
					w.released = true
				}
			}
		case *messages.Get:
			s.fetch[to.GetNodeId()] = true
			s.events = append(s.events, slicedEvent{what: "fetched", node: to.GetNodeId()})
		case *messages.ReduceTask:
			s.task(to, m)
		case *messages.ReduceTaskBatch:
			ts, err := BatchTasks(m)
			if err != nil {
				panic(err)
			}
			for _, m := range ts {
				s.task(to, m)
			}
		}
	}
}

// task is a node's worker taking m.
func (s *slicedSim) task(to *messages.NodeRef, m *messages.ReduceTask) {
	w := &slicedWorker{task: m, node: to.GetNodeId()}
	for _, old := range s.workers {
		if old.node == w.node && old.task.GetPosition() == m.GetPosition() && !old.released {
			old.released = true // the node runs a position's newest task
		}
	}
	s.workers = append(s.workers, w)
	s.outputs[m.GetOutputId()+"/"+w.node] = w
	s.logf("task p%d g%d on %s", m.GetPosition(), m.GetGeneration(), w.node)
	if s.alive[w.node] {
		s.events = append(s.events, slicedEvent{what: "started", w: w})
	}
}

// input is the worker writing in (nil for a source) and whether in can
// be read in full now.
func (s *slicedSim) input(in *messages.ReduceInput) (*slicedWorker, bool) {
	nd := in.GetNode().GetNodeId()
	if !s.alive[nd] {
		return nil, false
	}
	if s.home[in.GetObjectId()] != "" {
		return nil, s.home[in.GetObjectId()] == nd
	}
	w := s.outputs[in.GetObjectId()+"/"+nd]
	return w, w != nil && w.done && !w.released
}

func (s *slicedSim) ready(w *slicedWorker) bool {
	for _, in := range w.task.GetChildren() {
		if _, ok := s.input(in); !ok {
			return false
		}
	}
	return true
}

// output computes what w writes from its own source and its inputs,
// which must be readable.
func (s *slicedSim) output(w *slicedWorker) map[string]int {
	out := map[string]int{}
	if id := w.task.GetSourceId(); id != "" {
		if w.task.GetSliced() {
			out[fmt.Sprintf("%s@%d", id, w.task.GetSourceOffset())]++
		} else {
			maps.Copy(out, s.full([]string{id}))
		}
	}
	for _, in := range w.task.GetChildren() {
		src, _ := s.input(in)
		v := s.full([]string{in.GetObjectId()})
		if src != nil {
			v = src.value
		}
		for k, c := range v {
			out[k] += c
		}
	}
	return out
}

func (s *slicedSim) queue() {
	for _, w := range s.workers {
		if !w.started || w.done || w.released || !s.alive[w.node] || slices.ContainsFunc(s.events, func(e slicedEvent) bool { return e.w == w }) {
			continue
		}
		if s.ready(w) {
			s.events = append(s.events, slicedEvent{what: "done", w: w, value: s.output(w)})
		}
	}
}

func runSlicedSim(t *testing.T, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x511ced))
	n := 2 + rng.IntN(7)
	sources := ids("s", n)
	s := &slicedSim{t: t, rng: rng, n: n, alive: map[string]bool{}, home: map[string]string{}, outputs: map[string]*slicedWorker{},
		dropped: map[string]bool{}, released: map[string]bool{}, fetch: map[string]bool{}, reported: map[string]bool{}}
	for _, c := range plan.Slices(bigSize, n, 8) {
		s.offs = append(s.offs, c.Off)
	}
	// A third of the runs are d-ary from the start, some of them n of m
	// (one backup): a tree lowers n only when backups and late arrivals
	// cannot make it up.
	dary := rng.IntN(3) == 0
	req, cfg := allReduceRequest(sources), Config{AllReduceShape: ShapeSliced}
	if dary {
		cfg.AllReduceShape = ShapeDAry
		if n > 2 && rng.IntN(2) == 0 {
			req.NumObjects--
		}
	}
	s.r = newRed(req, cfg)
	s.apply(s.r.Step(t0, Begin{}))
	for i, id := range sources {
		node := fmt.Sprintf("n%d", i)
		s.alive[node] = true
		s.events = append(s.events, slicedEvent{what: "arrive", id: id, node: node})
	}
	for _, i := range rng.Perm(n)[:rng.IntN(3)] {
		s.events = append(s.events, slicedEvent{what: "fail", node: fmt.Sprintf("n%d", i), id: sources[i]})
	}
	replanned := ""
	nothingLeft := false
	var slicedGathers []*slicedWorker
	for step := 0; ; step++ {
		s.queue()
		if len(s.events) == 0 {
			break
		}
		if step > 100_000 {
			t.Fatalf("seed %d: no quiescence", seed)
		}
		i := rng.IntN(len(s.events))
		e := s.events[i]
		s.events = slices.Delete(s.events, i, i+1)
		s.chain(e.then)
		if e.w != nil && !s.alive[e.w.node] {
			continue
		}
		wasSliced, wasRunning := s.r.sliced != nil, s.r.sliced != nil && s.r.sliced.running
		if wasRunning && slicedGathers == nil {
			for _, w := range s.workers {
				if w.task.GetGather() {
					slicedGathers = append(slicedGathers, w)
				}
			}
		}
		switch e.what {
		case "arrive":
			if !s.alive[e.node] {
				continue
			}
			s.home[e.id] = e.node
			s.logf("arrive %s on %s", e.id, e.node)
			s.apply(s.r.Step(t0, located(e.id, bigSize, &messages.NodeRef{NodeId: e.node})))
		case "fail":
			s.alive[e.node] = false
			if s.home[e.id] == e.node {
				delete(s.home, e.id)
			}
			s.logf("fail %s", e.node)
			hadReply := s.reply != nil
			s.apply(s.r.Step(t0, NodeFailed{Node: e.node}))
			if !hadReply && s.reply != nil {
				// Failing at once is right only when no source has a copy.
				nothingLeft = len(s.home) == 0
			}
			// What the source's shard says next, in its order: the dead
			// copy's location, sent before the failure; that the source
			// is lost (its only copy was there), unless the shard
			// restarted and forgot; a fresh Put's location.
			var next []slicedEvent
			if rng.IntN(2) == 0 {
				next = append(next, slicedEvent{what: "stale", id: e.id, node: e.node})
			}
			if rng.IntN(3) > 0 {
				next = append(next, slicedEvent{what: "lost", id: e.id})
			}
			if rng.IntN(2) == 0 {
				// Its source is Put again on a fresh node.
				fresh := e.node + "'"
				s.alive[fresh] = true
				next = append(next, slicedEvent{what: "arrive", id: e.id, node: fresh})
			}
			s.chain(next)
		case "stale":
			s.logf("stale location of %s on %s", e.id, e.node)
			s.apply(s.r.Step(t0, located(e.id, bigSize, &messages.NodeRef{NodeId: e.node})))
		case "lost":
			s.reported[e.id] = true
			s.logf("%s reported lost", e.id)
			hadReply := s.reply != nil
			s.apply(s.r.Step(t0, lostUpdate(e.id)))
			if !hadReply && s.reply != nil {
				nothingLeft = len(s.home) == 0
			}
		case "started":
			e.w.started = true
			m := started(int(e.w.task.GetPosition()))
			m.Generation = e.w.task.GetGeneration()
			s.apply(s.r.Step(t0, m))
		case "done":
			e.w.done, e.w.value = true, e.value
			s.logf("done p%d g%d on %s", e.w.task.GetPosition(), e.w.task.GetGeneration(), e.w.node)
			m := done(int(e.w.task.GetPosition()))
			m.Generation = e.w.task.GetGeneration()
			hadResult := s.r.reply != nil
			s.apply(s.r.Step(t0, m))
			if !hadResult && s.r.reply != nil && s.r.sliced == nil {
				s.result = e.w
			}
		case "fetched":
			if s.alive[e.node] {
				s.apply(s.r.Step(t0, Fetched{Node: e.node, Err: nil}))
			}
		}
		if wasSliced && s.r.sliced == nil && !s.r.Over() {
			replanned = "replanned before the chains"
			if wasRunning {
				replanned = "replanned while running"
				// The abandoned run stopped everywhere and left no copy.
				for _, w := range slicedGathers {
					if s.alive[w.node] && (!s.dropped[w.node] || !s.released[w.node]) {
						t.Fatalf("seed %d: abandoned gather on %s: dropped %v, released %v\n%v", seed, w.node, s.dropped, s.released, s.log)
					}
				}
			}
		}
	}
	dump := func() string { return fmt.Sprintf("seed %d, n %d:\n  %v", seed, n, s.log) }
	if s.reply == nil {
		if held, need := len(s.r.sources), int(s.r.req.GetNumObjects()); held >= need {
			t.Fatalf("hang: %d sources held, %d needed, and nothing is left to happen\n%s", held, need, dump())
		}
		if !slices.ContainsFunc(sources, func(id string) bool { return s.home[id] == "" && !s.reported[id] }) {
			t.Fatalf("hang: every source is located or was reported lost, and nothing is left to happen\n%s", dump())
		}
		fx := s.r.Step(t0.Add(time.Hour), DeadlineTimer{})
		if !errorsIs(fx.Reply(), messages.ErrTimeout) {
			t.Fatalf("expire with a source missing: %v\n%s", fx.Reply(), dump())
		}
		return "TIMEOUT"
	}
	if err := messages.ErrOrNil(s.reply.GetError()); err != nil {
		if (errorsIs(s.reply, messages.ErrLost) || errorsIs(s.reply, messages.ErrUnavailable)) && nothingLeft {
			return "LOST: every source lost"
		}
		t.Fatalf("failed: %v\n%s", err, dump())
	}
	red, unred := s.reply.GetReducedIds(), s.reply.GetUnreducedIds()
	if all := slices.Sorted(slices.Values(append(slices.Clone(red), unred...))); !slices.Equal(all, sources) {
		t.Fatalf("reduced %v and unreduced %v do not split the sources\n%s", red, unred, dump())
	}
	want := s.full(red)
	if dary {
		replanned = "d-ary"
		if s.replans > 0 {
			replanned = "d-ary, n lowered"
		}
	}
	if replanned == "" && s.replans > 0 {
		// A source reported lost before any arrived: the first arrival
		// planned a tree for the lowered n.
		replanned = "n lowered before the first arrival"
	}
	if replanned == "" {
		// Sliced to the end: every source, in every gather's copy.
		if !slices.Equal(red, sources) {
			t.Fatalf("sliced run reduced %v\n%s", red, dump())
		}
		for _, w := range s.workers {
			if w.task.GetGather() && s.alive[w.node] && (!w.done || !maps.Equal(w.value, want)) {
				t.Fatalf("gather on %s holds %v, want %v\n%s", w.node, w.value, want, dump())
			}
		}
		return "sliced"
	}
	if s.result == nil || !maps.Equal(s.result.value, want) {
		t.Fatalf("the re-planned tree's result %v, want %v (reduced %v)\n%s", s.result, want, red, dump())
	}
	if len(red) != int(s.r.req.GetNumObjects()) {
		t.Fatalf("reduced %v, the re-plan asked for %d\n%s", red, s.r.req.GetNumObjects(), dump())
	}
	if s.replans > 1 && !dary {
		// The tree lost a participant too, and lowered n again.
		replanned = "replanned again in the tree"
	}
	// Every participant alive at the end holds the result: the root's node,
	// or one that was asked to fetch it.
	for _, id := range red {
		nd := fmt.Sprintf("n%s", id[1:]) // its first copy's node; a fresh one's is n<i>'
		if s.alive[nd] && nd != s.result.node && !s.fetch[nd] {
			t.Fatalf("participant %s (%s) was never asked to fetch the result\n%s", nd, id, dump())
		}
	}
	return replanned
}

// finishTree runs a re-planned tree to its answer: every task starts
// (the root's start asks the participants to fetch), then finishes, then
// every fetch ends. It returns the reply and the nodes asked to fetch.
func finishTree(t *testing.T, r *Reduction, tasks []Task) (*messages.ReduceReply, []string) {
	t.Helper()
	var fetch []string
	var reply *messages.ReduceReply
	take := func(fx Effects) {
		fetch = append(fetch, nodeIDs(fx.Fetch())...)
		if rep := fx.Reply(); rep != nil {
			reply = rep
		}
		tasks = append(tasks, fx.Tasks()...)
	}
	for i := 0; i < len(tasks); i++ {
		tk := tasks[i].Task
		if int(tk.GetGeneration()) <= r.tree.staleGen {
			t.Fatalf("re-planned task p%d has generation %d, as the abandoned run's", tk.GetPosition(), tk.GetGeneration())
		}
		take(r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: tk.GetPosition(), Generation: tk.GetGeneration()}))
	}
	for _, tk := range tasks {
		take(r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: tk.Task.GetPosition(), Generation: tk.Task.GetGeneration()}))
	}
	for _, n := range fetch {
		take(r.Step(t0, Fetched{Node: n, Err: nil}))
	}
	return reply, fetch
}

// TestSlicedReplan: a participant that fails before the chains start,
// during the reduce-scatter, or during the gather takes its copy of its
// source, not the source: the AllReduce asks the source's shard for it
// again at once. Once the chains ran, the sliced run ends and the
// AllReduce re-plans as a tree of n; the surviving participants are
// released and their gathers' copies dropped before the new tasks go
// out, and the old run's late reports change nothing. Before the chains,
// the sliced run waits for a copy. Then the shard answers: that the
// source is lost (the failed node held its last copy), and the tree
// lowers n and answers with exactly the sources that still exist, the
// dead participant's unreduced; or with another copy (a reader's), which
// takes the source's place, and every source is reduced.
func TestSlicedReplan(t *testing.T) {
	const n = 4
	for _, phase := range []string{"before the chains", "reduce-scatter", "gather"} {
		for _, answer := range []string{"lost", "another copy"} {
			t.Run(phase+"/"+answer, func(t *testing.T) {
				r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced})
				r.start = node(0)
				r.Step(t0, Begin{})
				arrive := n
				if phase == "before the chains" {
					arrive = 3 // s3 is still being produced
				}
				var sliced []Task
				for i := 0; i < arrive; i++ {
					sliced = append(sliced, r.Step(t0, located(fmt.Sprintf("s%d", i), bigSize, node(i))).Tasks()...)
				}
				sliced = byPosition(sliced)
				switch phase {
				case "reduce-scatter":
					for _, tk := range sliced[:n*n] {
						r.Step(t0, started(int(tk.Task.GetPosition())))
					}
					r.Step(t0, done(0)) // slice 0's leaf
				case "gather":
					for _, tk := range sliced {
						r.Step(t0, started(int(tk.Task.GetPosition())))
					}
					for _, tk := range sliced[:n*n] {
						r.Step(t0, done(int(tk.Task.GetPosition())))
					}
					r.Step(t0, done(n*n)) // n0's gather: its copy is complete
				}
				fx := r.Step(t0, NodeFailed{Node: "n2"})
				if fx.Reply() != nil {
					t.Fatalf("the AllReduce answered at the failure: %v", fx.Reply())
				}
				if !slices.ContainsFunc(fx.Sends, func(s outbox.Send) bool {
					m, ok := s.Msg.(*messages.Subscribe)
					return ok && m.GetObjectId() == "s2" && m.GetLocatedBefore()
				}) {
					t.Fatalf("s2 not asked for again at n2's failure: %v", fx.Sends)
				}
				if r.req.GetNumObjects() != n {
					t.Fatalf("n lowered to %d at the failure, before the shard said s2 was lost", r.req.GetNumObjects())
				}
				if phase == "before the chains" {
					if r.plan.GetShape() != ShapeSliced || replanned(fx) != nil || len(fx.Tasks()) != 0 {
						t.Fatalf("before the chains: shape %q, replan %+v, tasks %v", r.plan.GetShape(), replanned(fx), fx.Tasks())
					}
				} else {
					if ev := replanned(fx); r.plan.GetShape() != ShapeDAry || len(r.plan.GetPositions()) != n || ev == nil || ev.Node != "n2" || ev.Num != n {
						t.Fatalf("re-plan: shape %q, event %+v, plan %v", r.plan.GetShape(), ev, r.plan)
					}
					// The abandoned run: every surviving participant (each had a
					// gather) is released and loses its copy, before the new tasks.
					var drops, releases []string
					firstTask := slices.IndexFunc(fx.Sends, func(s outbox.Send) bool { return isTasks(s.Msg) })
					for i, s := range fx.Sends {
						switch m := s.Msg.(type) {
						case *messages.DropObject:
							drops = append(drops, s.To.(*messages.NodeRef).GetNodeId())
						case *messages.ReduceRelease:
							if m.GetKeepTarget() {
								t.Fatalf("the abandoned run keeps its target: %v", m)
							}
							releases = append(releases, s.To.(*messages.NodeRef).GetNodeId())
						default:
							continue
						}
						if firstTask >= 0 && i > firstTask {
							t.Fatalf("%T to %v after the new tasks", s.Msg, s.To)
						}
					}
					slices.Sort(drops)
					if want := []string{"n0", "n1", "n3"}; !slices.Equal(drops, want) || !slices.Equal(releases, want) {
						t.Fatalf("drops %v, releases %v, want %v", drops, releases, want)
					}
					// Late reports of the old run: the root's gather and a chain
					// root, generation 1, at positions the new tree uses.
					for p := 0; p < n; p++ {
						if fx := r.Step(t0, done(p)); len(fx.Sends) != 0 || r.reply != nil {
							t.Fatalf("a stale report of position %d was taken: %v", p, fx.Sends)
						}
					}
				}
				tasks := fx.Tasks()
				// The shard's answer to the new Subscribe may list the dead
				// copy first (it had not heard of the failure): ignored.
				if fx := r.Step(t0, completeAt("s2", node(2))); len(fx.Tasks()) != 0 || len(fx.Watch) != 0 {
					t.Fatalf("the dead n2's copy of s2 was taken: %+v", fx)
				}
				if answer == "another copy" {
					tasks = append(tasks, r.Step(t0, completeAt("s2", node(7))).Tasks()...)
					if phase == "before the chains" {
						tasks = r.Step(t0, located("s3", bigSize, node(3))).Tasks()
						if r.plan.GetShape() != ShapeSliced || len(tasks) == 0 {
							t.Fatalf("every source there: shape %q, tasks %v", r.plan.GetShape(), tasks)
						}
						for _, tk := range tasks {
							if tk.Node.GetNodeId() == "n2" || tk.Task.GetSourceId() == "s2" && tk.Node.GetNodeId() != "n7" {
								t.Fatalf("a sliced task %v on %s: s2 is on n7 now", tk.Task, tk.Node.GetNodeId())
							}
						}
						return // the sliced run goes on as TestSlicedTasks checks
					}
					reply, fetch := finishTree(t, r, tasks)
					mustReduce(t, reply, ids("s", n), nil)
					root := r.plan.GetPositions()[r.tree.tree.Root()].GetNodeId()
					got := append(slices.Clone(fetch), root)
					slices.Sort(got)
					if !slices.Equal(got, []string{"n0", "n1", "n3", "n7"}) {
						t.Fatalf("fetches %v and root %s: want every participant, n7 for s2", fetch, root)
					}
					return
				}
				fx = r.Step(t0, lostUpdate("s2"))
				if ev := replanned(fx); ev == nil || ev.Num != n-1 || !slices.Equal(ev.Lost, []string{"s2"}) || r.req.GetNumObjects() != n-1 ||
					r.plan.GetShape() != ShapeDAry || len(r.plan.GetPositions()) != n-1 {
					t.Fatalf("s2 lost: replan %+v, shape %q, %d sources, plan %v", ev, r.plan.GetShape(), r.req.GetNumObjects(), r.plan)
				}
				tasks = fx.Tasks() // the lowered tree's: the tree of n is abandoned
				if phase == "before the chains" {
					tasks = append(tasks, r.Step(t0, located("s3", bigSize, node(3))).Tasks()...)
				}
				// The dead participant's source is Put again elsewhere: a backup.
				tasks = append(tasks, r.Step(t0, located("s2", bigSize, node(7))).Tasks()...)
				reply, fetch := finishTree(t, r, tasks)
				mustReduce(t, reply, []string{"s0", "s1", "s3"}, []string{"s2"})
				// Every surviving participant but the root's node fetches the result.
				root := r.plan.GetPositions()[r.tree.tree.Root()].GetNodeId()
				got := append(slices.Clone(fetch), root)
				slices.Sort(got)
				if !slices.Equal(got, []string{"n0", "n1", "n3"}) {
					t.Fatalf("fetches %v and root %s: want every surviving participant", fetch, root)
				}
			})
		}
	}
}

// TestSlicedReplanNothingLeft: a failure that takes the last copy of
// every source fails the AllReduce with LOST once the shards say so, and
// frees the target.
func TestSlicedReplanNothingLeft(t *testing.T) {
	r := newRed(allReduceRequest(ids("s", 2)), Config{AllReduceShape: ShapeSliced})
	r.start = node(5)
	r.Step(t0, Begin{})
	r.Step(t0, located("s0", bigSize, node(0)))
	if tasks := r.Step(t0, located("s1", bigSize, node(0))).Tasks(); len(tasks) == 0 {
		t.Fatal("the chains did not start")
	}
	if fx := r.Step(t0, NodeFailed{Node: "n0"}); fx.Reply() != nil {
		t.Fatalf("answered %v before the shards said whether a copy is left", fx.Reply())
	}
	if fx := r.Step(t0, lostUpdate("s0")); fx.Reply() != nil {
		t.Fatalf("answered %v with s1 not known lost", fx.Reply())
	}
	fx := r.Step(t0, lostUpdate("s1"))
	if !errorsIs(fx.Reply(), messages.ErrLost) || !fx.ReleaseTarget() {
		t.Fatalf("reply %v, release target %v: want LOST and the target freed", fx.Reply(), fx.ReleaseTarget())
	}
}

// TestSlicedRingTasks: with every participant a node of its own, each
// reduced slice goes around the ring by relays, each reading the copy of
// the participant before it, and every gather reads its slices from its
// own node; so every input of every position is on its own node or its
// predecessor's. The reply waits for the gathers, as without the ring.
func TestSlicedRingTasks(t *testing.T) {
	const n = 4
	size := int64(4*(1<<15)+3) * 8 // int64: slices of uneven length
	cut := plan.Slices(size, n, 8)
	r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced})
	r.start = node(0)
	r.Step(t0, Begin{})
	var tasks []Task
	for i := 0; i < n; i++ {
		tasks = append(tasks, r.Step(t0, located(fmt.Sprintf("s%d", i), size, node(i))).Tasks()...)
	}
	if !r.plan.GetRingGather() {
		t.Fatal("the plan does not say the all-gather goes around the ring")
	}
	if want := n*n + n + n*(n-1); len(tasks) != want {
		t.Fatalf("%d tasks, want %d: n chains of n, n gathers, n slices relayed n-1 times", len(tasks), want)
	}
	tasks = byPosition(tasks)
	nodeOf := func(tk Task) int { return int(tk.Node.GetNodeId()[1] - '0') }
	// Every input is on the reader's node or on its predecessor's.
	for _, tk := range tasks {
		for _, in := range tk.Task.GetChildren() {
			from := int(in.GetNode().GetNodeId()[1] - '0')
			if from != nodeOf(tk) && from != (nodeOf(tk)+n-1)%n {
				t.Fatalf("position %d on n%d reads %s on n%d: not its own node or its predecessor", tk.Task.GetPosition(), nodeOf(tk), in.GetObjectId(), from)
			}
		}
	}
	relays := tasks[n*n+n:]
	for i, tk := range relays {
		k, j := i/(n-1), i%(n-1)+1
		task := tk.Task
		from := InternalID(testReduceID, k*n+n-1, 1) // the root's output
		if j > 1 {
			from = InternalID(testReduceID, int(relays[i-1].Task.GetPosition()), 1)
		}
		if !task.GetRelay() || !task.GetQuiet() || task.GetGather() || task.GetSourceId() != "" || task.GetSize() != cut[k].Len || nodeOf(tk) != (k+j)%n ||
			len(task.GetChildren()) != 1 || task.GetChildren()[0].GetObjectId() != from || task.GetOutputId() != InternalID(testReduceID, int(task.GetPosition()), 1) {
			t.Fatalf("relay %d of slice %d: %v on n%d", j, k, task, nodeOf(tk))
		}
		if err := storeproto.CheckTask(task); err != nil {
			t.Fatalf("relay %d of slice %d: %v", j, k, err)
		}
	}
	for _, g := range tasks[n*n : n*n+n] {
		i := nodeOf(g)
		for k, in := range g.Task.GetChildren() {
			want := InternalID(testReduceID, k*n+n-1, 1) // its own slice: the root's output
			if k != i {
				want = InternalID(testReduceID, int(relays[k*(n-1)+(i-k+n)%n-1].Task.GetPosition()), 1)
			}
			if in.GetNode().GetNodeId() != g.Node.GetNodeId() || in.GetObjectId() != want || in.GetOffset() != cut[k].Off {
				t.Fatalf("n%d's gather reads slice %d from %v, want %s here", i, k, in, want)
			}
		}
	}
	// Relays report like chain links: nothing happens until the gathers.
	for _, tk := range relays {
		if fx := r.Step(t0, done(int(tk.Task.GetPosition()))); fx.Reply() != nil || len(fx.Sends) != 0 {
			t.Fatalf("relay %d done: %v", tk.Task.GetPosition(), fx.Sends)
		}
	}
	var fetch []string
	for i, g := range tasks[n*n : n*n+n] {
		fx := r.Step(t0, done(int(g.Task.GetPosition())))
		if fx.Reply() != nil || (len(fx.Fetch()) != 0) != (i == n-1) {
			t.Fatalf("gather %d done: reply %v, Gets on %v", i, fx.Reply(), fx.Fetch())
		}
		fetch = append(fetch, nodeIDs(fx.Fetch())...)
	}
	for j, node := range fetch {
		if fx := r.Step(t0, Fetched{Node: node, Err: nil}); (fx.Reply() != nil) != (j == n-1) {
			t.Fatalf("%s's copy is whole: reply %v", node, fx.Reply())
		}
	}
	// A failed relay fails the run like any position.
	r = newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced})
	r.Step(t0, Begin{})
	for i := 0; i < n; i++ {
		r.Step(t0, located(fmt.Sprintf("s%d", i), size, node(i)))
	}
	m := done(r.sliced.relayPos(1, 2))
	m.Error = messages.Errorf(messages.ErrorCode_INTERNAL, "disk on fire")
	if fx := r.Step(t0, m); !errorsIs(fx.Reply(), messages.ErrInternal) {
		t.Fatalf("a failed relay: reply %v, want INTERNAL", fx.Reply())
	}
}

// byPosition sorts tasks by position (a sliced run's chains, then its
// gathers, then its relays).
func byPosition(tasks []Task) []Task {
	return slices.SortedStableFunc(slices.Values(tasks), func(a, b Task) int { return cmp.Compare(a.Task.GetPosition(), b.Task.GetPosition()) })
}

// TestSlicedTasksBatched: the sliced run's tasks reach each participant
// in one ReduceTaskBatch, its n chain positions (one per slice) and its
// gather in position order, the participants in the order of their first
// position, after nothing else; a step with one task for a node sends it
// alone; and Config.UnbatchedTasks sends one ReduceTask per position, as
// before the batches.
func TestSlicedTasksBatched(t *testing.T) {
	const n = 4
	run := func(cfg Config) Effects {
		cfg.AllReduceShape = ShapeSliced
		r := newRed(allReduceRequest(ids("s", n)), cfg)
		r.start = node(0)
		r.Step(t0, Begin{})
		for i := 0; i < n-1; i++ {
			if fx := r.Step(t0, located(fmt.Sprintf("s%d", i), bigSize, node(i))); len(fx.Tasks()) != 0 {
				t.Fatalf("tasks before every source arrived: %v", fx.Tasks())
			}
		}
		return r.Step(t0, located(fmt.Sprintf("s%d", n-1), bigSize, node(n-1)))
	}
	fx := run(Config{})
	var order []string
	for _, s := range fx.Sends {
		b, ok := s.Msg.(*messages.ReduceTaskBatch)
		if !ok {
			if isTasks(s.Msg) {
				t.Fatalf("a lone %T to %v: every participant has 2n tasks", s.Msg, s.To)
			}
			continue
		}
		nd := s.To.(*messages.NodeRef).GetNodeId()
		order = append(order, nd)
		if b.GetRing() == nil || len(b.GetTasks()) != 0 {
			t.Fatalf("%s's batch lists %d tasks, share %v: a ring's are stated", nd, len(b.GetTasks()), b.GetRing())
		}
		ts, err := BatchTasks(b)
		if err != nil {
			t.Fatalf("%s's share: %v", nd, err)
		}
		var pos []int
		for _, tk := range ts {
			pos = append(pos, int(tk.GetPosition()))
		}
		// Participant i holds chain index (i-k-1) mod n of slice k.
		var want []int
		i := int(nd[1] - '0')
		for k := 0; k < n; k++ {
			want = append(want, k*n+((i-k-1)%n+n)%n)
		}
		// Then the relays it holds, slice by slice: slice k's ((i-k) mod
		// n)-th, position n·n + n + k(n-1) + j - 1.
		for k := 0; k < n; k++ {
			if j := (i - k + n) % n; j > 0 {
				want = append(want, n*n+n+k*(n-1)+j-1)
			}
		}
		gather := slices.Index([]string{"n0", "n1", "n2", "n3"}, nd) // the creator n0's first: r.start
		want = append(want, n*n+gather)
		if !slices.Equal(pos, want) {
			t.Fatalf("%s's batch: positions %v, want %v", nd, pos, want)
		}
		for _, tk := range ts {
			if tk.GetTimeoutMs() <= 0 || tk.GetReduceId() != testReduceID {
				t.Fatalf("%s's batch: task %v", nd, tk)
			}
		}
	}
	// Position 0 is slice 0's leaf, on participant 1; then 2, 3, 0.
	if !slices.Equal(order, []string{"n1", "n2", "n3", "n0"}) {
		t.Fatalf("batches to %v, want n1, n2, n3, n0 (the order of their first positions)", order)
	}
	if got := len(fx.Tasks()); got != 2*n*n {
		t.Fatalf("%d tasks in the batches, want %d", got, 2*n*n)
	}

	fx = run(Config{UnbatchedTasks: true})
	count := 0
	for _, s := range fx.Sends {
		switch s.Msg.(type) {
		case *messages.ReduceTaskBatch:
			t.Fatal("UnbatchedTasks sent a batch")
		case *messages.ReduceTask:
			count++
		}
	}
	if count != 2*n*n {
		t.Fatalf("%d ReduceTasks unbatched, want %d", count, 2*n*n)
	}
}
