package coordinator

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/coordinator/plan"
	"github.com/hoplite-go/hoplite/messages"
)

func allReduceRequest(sources []string) *messages.Reduce {
	r := request(sources, len(sources))
	r.AllReduce = true
	return r
}

// TestSlicedChosenByCostModel: an AllReduce of every source takes the
// shape the cost model prices lower, and reports both prices; a Reduce,
// an AllReduce of fewer than all sources, or a forced d-ary shape never
// slices.
func TestSlicedChosenByCostModel(t *testing.T) {
	cases := []struct {
		name   string
		req    *messages.Reduce
		cfg    Config
		size   int64
		sliced bool
	}{
		{"allreduce 1 MiB of 4", allReduceRequest(ids("s", 4)), Config{}, bigSize, true},
		{"allreduce 1 MiB of 8 (its streams' contention)", allReduceRequest(ids("s", 8)), Config{}, bigSize, false},
		{"allreduce just above the inline limit", allReduceRequest(ids("s", 2)), Config{}, testInline + 8, false},
		{"reduce", request(ids("s", 8), 8), Config{}, bigSize, false},
		{"allreduce of 6 of 8", func() *messages.Reduce { r := allReduceRequest(ids("s", 8)); r.NumObjects = 6; return r }(), Config{}, bigSize, false},
		{"forced d-ary", allReduceRequest(ids("s", 8)), Config{AllReduceShape: ShapeDAry}, bigSize, false},
		{"forced degree", allReduceRequest(ids("s", 8)), Config{ForceDegree: 2}, bigSize, false},
		{"forced sliced just above the inline limit", allReduceRequest(ids("s", 2)), Config{AllReduceShape: ShapeSliced}, testInline + 8, true},
	}
	for _, c := range cases {
		r := newRed(c.req, c.cfg)
		r.Begin(t0)
		r.Located(located("s0", c.size, node(0)), t0)
		if got := r.plan.GetShape() == ShapeSliced; got != c.sliced {
			t.Errorf("%s: shape %q, want sliced %v", c.name, r.plan.GetShape(), c.sliced)
		}
		if !c.req.GetAllReduce() || c.req.GetNumObjects() != int32(len(c.req.GetSourceIds())) || c.cfg.AllReduceShape == ShapeDAry || c.cfg.ForceDegree > 0 {
			continue
		}
		// The plan's prices are the model's at the L and B it used.
		ch := plan.ChooseAllReduce(len(c.req.GetSourceIds()), time.Duration(r.plan.GetLatencyNs()), r.plan.GetBandwidth(), c.size, 8, len(c.req.GetSourceIds()))
		want := []*messages.ShapeCost{{Shape: ShapeSliced, CostUs: ch.SlicedCost.Microseconds()}, {Shape: ShapeDAry, CostUs: ch.ReduceBroadcastCost.Microseconds()}}
		if fmt.Sprint(r.plan.GetShapeCosts()) != fmt.Sprint(want) {
			t.Errorf("%s: shape costs %v, want %v", c.name, r.plan.GetShapeCosts(), want)
		}
		if c.cfg == (Config{}) && c.sliced != ch.Sliced {
			t.Errorf("%s: the model says sliced %v", c.name, ch.Sliced)
		}
	}
}

// TestSlicedTasks drives a sliced AllReduce of 3 sources by hand: the
// rotated chains, their slices, the gathers, and the publications,
// creator first, before the answer.
func TestSlicedTasks(t *testing.T) {
	const n = 3
	size := int64(3*(1<<15)+1) * 8 // int64: 98305 elements, the first slice one longer
	cut := plan.Slices(size, n, 8)
	r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced})
	r.start = node(2) // the caller's node holds s2: it creates the target
	r.Begin(t0)
	var tasks []Task
	for i := 0; i < n; i++ {
		tasks = append(tasks, r.Located(located(fmt.Sprintf("s%d", i), size, node(i)), t0).Tasks()...)
	}
	// Every task goes out once every source is there: n chains of n,
	// then the gathers. Slice k's chain starts at participant k+1 and
	// ends (its root) at participant k; each link reads its predecessor.
	if len(tasks) != n*n+n {
		t.Fatalf("%d tasks after every arrival, want %d", len(tasks), n*n+n)
	}
	for p, tk := range tasks[:n*n] {
		task := tk.Task
		k, c := p/n, p%n
		if int(task.GetPosition()) != p || tk.Node.GetNodeId() != fmt.Sprintf("n%d", (k+1+c)%n) || !task.GetSliced() ||
			task.GetSourceId() != fmt.Sprintf("s%d", (k+1+c)%n) || task.GetSourceOffset() != cut[k].Off || task.GetSize() != cut[k].Len ||
			task.GetRoot() || task.GetOutputId() != InternalID(testReduceID, p, 1) {
			t.Fatalf("chain position %d: %v on %s", p, task, tk.Node.GetNodeId())
		}
		switch kids := task.GetChildren(); {
		case c == 0 && len(kids) != 0:
			t.Fatalf("leaf %d reads %v", p, kids)
		case c > 0 && (len(kids) != 1 || kids[0].GetObjectId() != InternalID(testReduceID, p-1, 1) || kids[0].GetNode().GetNodeId() != fmt.Sprintf("n%d", (k+c)%n)):
			t.Fatalf("link %d reads %v", p, kids)
		}
	}
	gathers := tasks[n*n:]
	// A started report changes nothing; a failed one fails the AllReduce.
	for _, tk := range tasks {
		if fx := r.Started(started(int(tk.Task.GetPosition())), t0); len(fx.Sends) != 0 {
			t.Fatalf("p%d started: %v", tk.Task.GetPosition(), fx.Sends)
		}
	}
	if len(gathers) != n || gathers[0].Node.GetNodeId() != "n2" || !gathers[0].Task.GetRoot() {
		t.Fatalf("gathers %v: want 3, the caller's node's first and the creator", gathers)
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
		fx := r.Done(m, t0)
		if i < n-1 {
			if fx.Reply() != nil {
				t.Fatal("answered before every gather was done")
			}
			continue
		}
		var pubs []*messages.PublishLocation
		replyAt, lastPub := -1, -1
		for j, s := range fx.Sends {
			switch m := s.Msg.(type) {
			case *messages.PublishLocation:
				pubs, lastPub = append(pubs, m), j
			case *messages.ReduceReply:
				replyAt = j
			}
		}
		if len(pubs) != n || !pubs[0].GetCreator() || pubs[0].GetNode().GetNodeId() != "n2" || pubs[1].GetCreator() || pubs[0].GetFingerprint() != 0xfeed || replyAt < lastPub {
			t.Fatalf("publications %v (reply at %d)", pubs, replyAt)
		}
		if rep := fx.Reply(); rep.GetError() != nil || !slices.Equal(rep.GetReducedIds(), ids("s", n)) || !fx.ReleaseKeep() {
			t.Fatalf("reply %v", rep)
		}
	}
}

// The sliced AllReduce simulated: arrivals, node failures before and
// after the chains start, sources that come back from a fresh node, and
// worker reports, in an order a seed picks. Liveness: when nothing is
// left to happen, the Reduction has answered, or it is missing a source
// and its deadline fails it with TIMEOUT. Safety: a success reduced
// every source and no participant died after the chains started; a
// failure after they started is UNAVAILABLE and drops the copies of
// every gather that was sent.
func TestSlicedSimulated(t *testing.T) {
	seeds := simSeeds(t)
	seeds = seeds[:min(len(seeds), 1000)]
	outcomes := map[string]int{}
	for _, seed := range seeds {
		outcomes[runSlicedSim(t, seed)]++
		if t.Failed() {
			return
		}
	}
	// The schedules must reach every ending, or they check little.
	if len(seeds) > 100 && (outcomes["ok"] == 0 || outcomes["UNAVAILABLE"] == 0 || outcomes["TIMEOUT"] == 0) {
		t.Fatalf("outcomes %v: want successes, UNAVAILABLE failures and TIMEOUTs", outcomes)
	}
}

type slicedWorker struct {
	pos     int
	node    string
	inputs  []string // node ids it reads from
	after   []int    // positions whose outputs it needs complete
	started bool
	done    bool
}

func runSlicedSim(t *testing.T, seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 0x511ced))
	n := 2 + rng.IntN(7)
	sources := ids("s", n)
	r := newRed(allReduceRequest(sources), Config{AllReduceShape: ShapeSliced})
	alive := map[string]bool{}
	workers := map[int]*slicedWorker{}
	type ev struct {
		what string
		id   string
		node string
		w    *slicedWorker
	}
	var events []ev
	var log []string
	var reply *messages.ReduceReply
	var dropped []string
	runningAt := -1 // the step at which the chains started
	diedRunning := false
	apply := func(fx Effects) {
		if rep := fx.Reply(); rep != nil {
			if reply != nil {
				t.Fatalf("seed %d: a second reply", seed)
			}
			reply = rep
		}
		for _, s := range fx.Sends {
			if m, ok := s.Msg.(*messages.DropObject); ok && m.GetObjectId() == testTarget {
				dropped = append(dropped, s.To.(*messages.NodeRef).GetNodeId())
			}
		}
		for _, tk := range fx.Tasks() {
			w := &slicedWorker{pos: int(tk.Task.GetPosition()), node: tk.Node.GetNodeId()}
			for _, in := range tk.Task.GetChildren() {
				w.inputs = append(w.inputs, in.GetNode().GetNodeId())
			}
			if tk.Task.GetGather() {
				for k := 0; k < n; k++ {
					w.after = append(w.after, k*n+n-1)
				}
			} else if w.pos%n > 0 {
				w.after = []int{w.pos - 1}
			}
			workers[w.pos] = w
			log = append(log, fmt.Sprintf("task p%d on %s", w.pos, w.node))
			if alive[w.node] {
				events = append(events, ev{what: "started", w: w})
			}
		}
	}
	apply(r.Begin(t0))
	for i, id := range sources {
		node := fmt.Sprintf("n%d", i)
		alive[node] = true
		events = append(events, ev{what: "arrive", id: id, node: node})
	}
	for _, i := range rng.Perm(n)[:rng.IntN(3)] {
		events = append(events, ev{what: "fail", node: fmt.Sprintf("n%d", i), id: sources[i]})
	}
	for step := 0; ; step++ {
		// Workers whose inputs are complete can finish.
		for _, w := range workers {
			if !w.started || w.done || !alive[w.node] || slices.ContainsFunc(events, func(e ev) bool { return e.w == w }) {
				continue
			}
			ready := true
			for _, p := range w.after {
				if u := workers[p]; u == nil || !u.done || !alive[u.node] {
					ready = false
				}
			}
			if ready {
				events = append(events, ev{what: "done", w: w})
			}
		}
		if len(events) == 0 || step > 100_000 {
			break
		}
		i := rng.IntN(len(events))
		e := events[i]
		events = slices.Delete(events, i, i+1)
		if e.w != nil && !alive[e.w.node] {
			continue
		}
		switch e.what {
		case "arrive":
			if alive[e.node] {
				log = append(log, "arrive "+e.id+" on "+e.node)
				apply(r.Located(located(e.id, bigSize, &messages.NodeRef{NodeId: e.node}), t0))
				if r.sliced != nil && r.sliced.running && runningAt < 0 {
					runningAt = step
				}
			}
		case "fail":
			alive[e.node] = false
			log = append(log, "fail "+e.node)
			if runningAt >= 0 {
				diedRunning = true
			}
			apply(r.NodeFailed(e.node, t0))
			if rng.IntN(2) == 0 {
				// Its source is Put again on a fresh node.
				fresh := e.node + "'"
				alive[fresh] = true
				events = append(events, ev{what: "arrive", id: e.id, node: fresh})
			}
		case "started":
			e.w.started = true
			apply(r.Started(started(e.w.pos), t0))
		case "done":
			e.w.done = true
			apply(r.Done(done(e.w.pos), t0))
		}
	}
	dump := func() string { return fmt.Sprintf("seed %d, n %d:\n  %v", seed, n, log) }
	if reply == nil {
		if len(r.sources) == n {
			t.Fatalf("hang: every source is held and nothing is left to happen\n%s", dump())
		}
		fx := r.Expire(t0.Add(time.Hour))
		if !errorsIs(fx.Reply(), messages.ErrTimeout) {
			t.Fatalf("expire with a source missing: %v\n%s", fx.Reply(), dump())
		}
		return "TIMEOUT"
	}
	err := messages.ErrOrNil(reply.GetError())
	switch {
	case diedRunning && err == nil:
		// A participant that died after its gather finished does not
		// change the result: the AllReduce may still succeed then.
		for _, w := range workers {
			if !alive[w.node] && w.pos >= n*n && !w.done {
				t.Fatalf("success although %s died before its gather finished\n%s", w.node, dump())
			}
		}
	case !diedRunning && err != nil:
		t.Fatalf("failed with no participant dead after the start: %v\n%s", err, dump())
	case err != nil:
		if !errorsIs(reply, messages.ErrUnavailable) {
			t.Fatalf("failure %v, want UNAVAILABLE\n%s", err, dump())
		}
		for _, w := range workers {
			if w.pos >= n*n && !slices.Contains(dropped, w.node) {
				t.Fatalf("gather on %s was sent but its copy was not dropped (%v)\n%s", w.node, dropped, dump())
			}
		}
	}
	if err == nil && !slices.Equal(reply.GetReducedIds(), sources) {
		t.Fatalf("reduced %v\n%s", reply.GetReducedIds(), dump())
	}
	if err != nil {
		return messages.AsError(err).GetCode().String()
	}
	return "ok"
}
