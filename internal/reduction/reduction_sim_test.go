package reduction

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// A whole Reduce simulated deterministically, in the style of etcd raft's
// network tests: the Reduction is stepped by every event a real run can
// produce (arrivals, worker reports, node failures, a failed node's
// source arriving again from a new node) delivered in a random order
// chosen by a seed. Workers are modelled by what they need: a worker can
// finish only once its children's outputs are complete and their nodes
// alive (its task may go out before theirs start: it names outputs by
// generation, and every task must name its children's newest); a worker whose input node died reports an error or is stopped
// by an invalidation, whichever the schedule picks first.
//
// Liveness is the property under test: when no event is left, the
// Reduction must have answered if at least num sources were alive at
// the end. (A Reduction that waits for an event nobody will send hangs
// until its deadline; the chaos suite accepts such a TIMEOUT whenever a
// fault happened, so only this test can tell.) Safety: a success reduced
// num distinct sources, each on a node that was alive when the root's
// generation that finished was sent.

type simWorker struct {
	pos, gen int
	node     string
	source   string
	inputs   []simInput
	started  bool
	done     bool
	stopped  bool
}

type simInput struct {
	node string
	id   string
}

type simEvent struct {
	what string // "arrive", "fail", "rejoin", "delete", "stored", "fetched", "started", "done", "doneErr"
	id   string // source
	node string
	w    *simWorker
}

type reduceSim struct {
	t       *testing.T
	rng     *rand.Rand
	r       *Reduction
	n, m    int
	alive   map[string]bool // node -> alive
	home    map[string]string
	workers map[int]*simWorker // current worker per position (latest task)
	outputs map[string]*simWorker
	events  []simEvent
	killed  int
	log     []string
	now     time.Time
	timers  map[any]time.Time     // armed timers by message (a timer replaces its kind's)
	reply   *messages.ReduceReply // the answer, once sent
	deleted map[string]bool       // sources deleted (their bytes are gone)
	// stored: an inline result was stored, so it is fixed; deletions
	// after it (while the result is pushed) do not change what it holds.
	stored      bool
	lateDeleted map[string]bool // sources deleted once the result was stored
	inline      bool            // small sources: reduced in the coordinator
	// committed are the root workers the Reduction committed (told to
	// complete the target, which readers may then read whole).
	committed []*simWorker
}

func (s *reduceSim) logf(format string, args ...any) {
	s.log = append(s.log, fmt.Sprintf(format, args...))
}

func (s *reduceSim) apply(fx Effects) {
	checkShapes(s.t, s.r)
	for _, tm := range fx.Timers {
		s.timers[tm.Msg] = tm.At
	}
	if r := fx.Reply(); r != nil {
		if s.reply != nil {
			s.t.Fatalf("a second ReduceReply %v after %v", r, s.reply)
		}
		s.reply = r
		s.logf("reply %v", r)
	}
	if fx.StoreInline() != nil {
		s.events = append(s.events, simEvent{what: "stored"})
	}
	for _, n := range fx.Fetch() {
		// The result pushed to (or fetched by) a node: it answers once,
		// unless it died first (its failure is reported instead).
		s.events = append(s.events, simEvent{what: "fetched", node: n.GetNodeId()})
	}
	for _, snd := range fx.Sends {
		m, ok := snd.Msg.(*messages.ReduceCommit)
		if !ok {
			continue
		}
		w := s.workers[int(m.GetPosition())]
		if w == nil || w.gen != int(m.GetGeneration()) || w.node != snd.To.(*messages.NodeRef).GetNodeId() || !w.done {
			s.t.Fatalf("commit of p%d g%d on %v, which is not a finished root worker there\n%v", m.GetPosition(), m.GetGeneration(), snd.To, s.log)
		}
		s.committed = append(s.committed, w)
		s.logf("commit p%d g%d", w.pos, w.gen)
	}
	for _, inv := range fx.Invalidate() {
		if w := s.workers[int(inv.Task.GetPosition())]; w != nil && w.gen == int(inv.Task.GetGeneration()) {
			w.stopped = true
			s.logf("invalidate p%d g%d", w.pos, w.gen)
		}
	}
	for _, tk := range fx.Tasks() {
		t := tk.Task
		w := &simWorker{pos: int(t.GetPosition()), gen: int(t.GetGeneration()), node: tk.Node.GetNodeId(), source: t.GetSourceId()}
		for _, c := range t.GetChildren() {
			w.inputs = append(w.inputs, simInput{node: c.GetNode().GetNodeId(), id: c.GetObjectId()})
			// Stale reads are impossible by construction: an intermediate
			// input is always the output of its position's newest task.
			if src := s.outputs[c.GetObjectId()]; s.home[c.GetObjectId()] == "" && (src == nil || s.workers[src.pos] != src) {
				s.t.Fatalf("task p%d g%d names input %q, which is not the output of its position's newest task\n%v", w.pos, w.gen, c.GetObjectId(), s.log)
			}
		}
		if old := s.workers[w.pos]; old != nil && old.node == w.node {
			old.stopped = true // the node runs the newest generation of a position
		}
		if _, again := s.outputs[t.GetOutputId()]; again && !t.GetRoot() {
			s.t.Fatalf("output %q of p%d g%d was another task's output before", t.GetOutputId(), w.pos, w.gen)
		}
		s.workers[w.pos] = w
		s.outputs[t.GetOutputId()] = w
		s.logf("task p%d g%d on %s inputs %v", w.pos, w.gen, w.node, w.inputs)
		if !s.alive[w.node] {
			continue // a task to a dead node is lost
		}
		s.events = append(s.events, simEvent{what: "started", w: w})
	}
}

// inputsReady reports whether every input of w is complete and alive.
func (s *reduceSim) inputsReady(w *simWorker) (ready, lost bool) {
	ready = true
	for _, in := range w.inputs {
		if !s.alive[in.node] || s.deleted[in.id] {
			return false, true
		}
		if src := s.outputs[in.id]; src != nil && src.node == in.node && s.home[in.id] == "" {
			if src.stopped {
				ready = false
			} else if !src.done {
				ready = false
			}
		}
	}
	return ready, false
}

// step delivers one random pending event; false when none is left.
func (s *reduceSim) step() bool {
	s.readyWorkers()
	if len(s.events) == 0 {
		return false
	}
	i := s.rng.IntN(len(s.events))
	e := s.events[i]
	s.events = slices.Delete(s.events, i, i+1)
	s.deliver(e)
	return true
}

// readyWorkers queues the reports of workers that can report: those whose
// inputs are complete finish, those whose input died report it.
func (s *reduceSim) readyWorkers() {
	for _, w := range s.workers {
		if !w.started || w.done || w.stopped || !s.alive[w.node] {
			continue
		}
		if ready, lost := s.inputsReady(w); ready || lost {
			what := "done"
			if lost {
				what = "doneErr"
			}
			if !slices.ContainsFunc(s.events, func(e simEvent) bool { return e.w == w }) {
				s.events = append(s.events, simEvent{what: what, w: w})
			}
		}
	}
}

// deliver steps the Reduction with one event at s.now.
func (s *reduceSim) deliver(e simEvent) {
	if e.w != nil && (e.w.stopped || !s.alive[e.w.node]) {
		return // a stopped or dead worker reports nothing
	}
	switch e.what {
	case "arrive":
		if !s.alive[e.node] || s.deleted[e.id] {
			return // a deleted object is not created again
		}
		s.logf("arrive %s on %s", e.id, e.node)
		u := located(e.id, bigSize, &messages.NodeRef{NodeId: e.node})
		if s.inline {
			u = locatedInline(e.id, make([]byte, 8), u.GetNode())
		}
		s.apply(s.r.Step(s.now, u))
	case "stored":
		s.logf("stored")
		s.stored = true
		s.apply(s.r.Step(s.now, &messages.StoreReducedReply{ReduceId: testReduceID}))
	case "fetched":
		if !s.alive[e.node] {
			return
		}
		s.logf("fetched on %s", e.node)
		s.apply(s.r.Step(s.now, Fetched{Node: e.node, Err: nil}))
	case "fail":
		s.alive[e.node] = false
		s.killed++
		s.logf("fail %s", e.node)
		s.apply(s.r.Step(s.now, NodeFailed{Node: e.node}))
	case "delete":
		s.deleted[e.id] = true
		if s.stored {
			if s.lateDeleted == nil {
				s.lateDeleted = map[string]bool{}
			}
			s.lateDeleted[e.id] = true
		}
		s.logf("delete %s", e.id)
		s.apply(s.r.Step(s.now, &messages.LocationUpdate{ObjectId: e.id, Deleted: true}))
	case "rejoin":
		// The failed node's source is created again on a fresh node.
		n := e.node + "'"
		s.alive[n] = true
		s.events = append(s.events, simEvent{what: "arrive", id: e.id, node: n})
	case "started":
		e.w.started = true
		s.apply(s.r.Step(s.now, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: int32(e.w.pos), Generation: int32(e.w.gen)}))
	case "done", "doneErr":
		e.w.done = true
		m := &messages.ReduceTaskDone{ReduceId: testReduceID, Position: int32(e.w.pos), Generation: int32(e.w.gen)}
		if e.what == "doneErr" {
			m.Error = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "input node failed")
		}
		s.logf("%s p%d g%d", e.what, e.w.pos, e.w.gen)
		s.apply(s.r.Step(s.now, m))
	}
}

func runReduceSim(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := 2 + rng.IntN(9)
	n := 1 + rng.IntN(m)
	d := []int{0, 1, 2, 3, n}[rng.IntN(5)]
	sources := ids("s", m)
	s := &reduceSim{t: t, rng: rng, n: n, m: m, alive: map[string]bool{}, home: map[string]string{},
		workers: map[int]*simWorker{}, outputs: map[string]*simWorker{}, now: t0, timers: map[any]time.Time{}, deleted: map[string]bool{}}
	s.r = newRed(request(sources, n), Config{ForceDegree: d})
	s.apply(s.r.Step(s.now, Begin{}))
	for i, id := range sources {
		node := fmt.Sprintf("n%d", i)
		s.alive[node], s.home[id] = true, node
		s.events = append(s.events, simEvent{what: "arrive", id: id, node: node})
	}
	// Up to m-1 failures, some of whose sources come back from a new node.
	for _, i := range rng.Perm(m)[:rng.IntN(m)] {
		s.events = append(s.events, simEvent{what: "fail", node: fmt.Sprintf("n%d", i)})
		if rng.IntN(2) == 0 {
			s.events = append(s.events, simEvent{what: "rejoin", id: sources[i], node: fmt.Sprintf("n%d", i)})
		}
	}
	for steps := 0; s.step(); steps++ {
		if steps > 100_000 {
			t.Fatalf("seed %d: no quiescence after %d steps", seed, steps)
		}
	}
	live := 0
	for _, id := range sources {
		if s.r.sources[id] != nil {
			live++
		}
	}
	dump := func() string {
		return fmt.Sprintf("seed %d: reduce %d of %d, degree %d (forced %d)\n  %s", seed, n, m, s.r.tree.tree.Degree(), d,
			fmt.Sprint(s.log))
	}
	if !s.r.Over() && s.r.reply == nil {
		if live >= n {
			t.Fatalf("hang: %d sources are held, %d needed, and nothing is left to happen\n%s", live, n, dump())
		}
		// Too few sources: it rightly waits (until its deadline).
		fx := s.r.Step(t0.Add(time.Hour), DeadlineTimer{})
		if fx.Reply() == nil || !errorsIs(fx.Reply(), messages.ErrTimeout) {
			t.Fatalf("expire with too few sources: %+v\n%s", fx.Reply(), dump())
		}
		return
	}
	rep := s.r.reply
	if err := messages.ErrOrNil(rep.GetError()); err != nil {
		t.Fatalf("the Reduce failed: %v\n%s", err, dump())
	}
	// The one generation the target is readable whole in is the one the
	// reply names.
	if len(s.committed) != 1 {
		t.Fatalf("%d root generations committed, want 1\n%s", len(s.committed), dump())
	}
	if got, want := s.reducedBy(s.committed[0]), slices.Sorted(slices.Values(rep.GetReducedIds())); !slices.Equal(got, want) {
		t.Fatalf("the committed root reduced %v, the reply names %v\n%s", got, want, dump())
	}
	red := rep.GetReducedIds()
	if len(red) != n || len(slices.Compact(slices.Sorted(slices.Values(red)))) != n {
		t.Fatalf("reduced %v, want %d distinct\n%s", red, n, dump())
	}
	for _, id := range red {
		if !slices.Contains(sources, id) {
			t.Fatalf("reduced unknown id %q\n%s", id, dump())
		}
	}
}

// reducedBy lists the sources w's output holds, sorted: its own and its
// inputs', through the workers that made them.
func (s *reduceSim) reducedBy(w *simWorker) []string {
	var out []string
	var walk func(w *simWorker)
	walk = func(w *simWorker) {
		out = append(out, w.source)
		for _, in := range w.inputs {
			if s.home[in.id] != "" {
				out = append(out, in.id)
			} else if src := s.outputs[in.id]; src != nil {
				walk(src)
			}
		}
	}
	walk(w)
	slices.Sort(out)
	return out
}

func errorsIs(r *messages.ReduceReply, kind error) bool {
	return r != nil && errors.Is(messages.ErrOrNil(r.GetError()), kind)
}

// TestReductionSimulated runs many seeded schedules (HOPLITE_REDUCE_SIM
// sets how many; HOPLITE_SEED replays one).
func TestReductionSimulated(t *testing.T) {
	for _, seed := range simSeeds(t) {
		runReduceSim(t, seed)
		if t.Failed() {
			return
		}
	}
}

// simSeeds is the seeds a simulation runs: the one HOPLITE_SEED names, or
// HOPLITE_REDUCE_SIM of them (3000 by default).
func simSeeds(t *testing.T) []uint64 {
	t.Helper()
	if v := os.Getenv("HOPLITE_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("HOPLITE_SEED=%q", v)
		}
		return []uint64{seed}
	}
	n := 3000
	if v := os.Getenv("HOPLITE_REDUCE_SIM"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("HOPLITE_REDUCE_SIM=%q: want a number of seeds", v)
		}
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	return seeds
}
