package reduction

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The knee path of Reduce simulated with a clock: a Reduce with a knee
// policy, sources arriving at random times (often a fast group and
// stragglers, so there is a knee to find), nodes failing before and after
// the count is fixed (some sources created again elsewhere), sources
// deleted, and a random deadline. Timed events (arrivals, failures,
// deletions, the timers the Reduction asked for) happen in time order;
// the workers' reports happen in between in a random order, as in
// TestReductionSimulated.
//
// After every step: a Reduction that has not answered has its deadline
// armed; while it gates, its count is undecided exactly when a KneeGate
// fed the same arrivals and checks alone is, and the knee check is armed
// for that gate's next deadline; once fixed, it reduces the count that
// gate fixed. At the end: a success reduced that many distinct,
// undeleted, arrived sources (the first arrivals when nothing failed),
// with the gate's reason; a failure is TIMEOUT at the deadline or DELETED
// after a deletion that makes the Reduce impossible; and a Reduction that
// holds enough sources when its deadline comes, with nothing else left to
// happen, is a hang.

type simTimed struct {
	at time.Time
	e  simEvent
}

type kneeSim struct {
	*reduceSim
	seed   uint64
	ref    *KneeGate // the gate alone, fed what the sim delivered
	timed  []simTimed
	slow   bool // workers may still be busy when the deadline comes
	faults int  // failures and deletions delivered
	// faultsGating: those delivered before the count was fixed
	faultsGating int
	first        []string
	checks       int // knee checks delivered
}

// timerOrder fixes which of several timers due at one instant fires
// first (map order would make a seed unrepeatable).
var timerOrder = []any{KneeTimer{}, ResubscribeTimer{}, DeadlineTimer{}}

// nextTimed returns the earliest timed event or timer (ok false: none).
func (k *kneeSim) nextTimed() (at time.Time, timer any, ev int, ok bool) {
	ev = -1
	for i, te := range k.timed {
		if !ok || te.at.Before(at) {
			at, ev, ok = te.at, i, true
		}
	}
	for _, msg := range timerOrder {
		if t, armed := k.timers[msg]; armed && (!ok || t.Before(at)) {
			at, timer, ev, ok = t, msg, -1, true
		}
	}
	return at, timer, ev, ok
}

// step delivers one event; false once the Reduction answered or nothing
// is left.
func (k *kneeSim) step() bool {
	if k.r.Over() {
		return false
	}
	k.readyWorkers()
	at, timer, ev, ok := k.nextTimed()
	_, deadline := timer.(DeadlineTimer)
	timed := ok && (len(k.events) == 0 || k.rng.IntN(4) == 0 && (!deadline || k.slow))
	if !timed {
		if len(k.events) == 0 {
			return false
		}
		i := k.rng.IntN(len(k.events))
		e := k.events[i]
		k.events = slices.Delete(k.events, i, i+1)
		k.deliver(e)
		return true
	}
	if at.After(k.now) {
		k.now = at
	}
	if timer != nil {
		delete(k.timers, timer)
		k.fire(timer)
		return true
	}
	e := k.timed[ev].e
	k.timed = slices.Delete(k.timed, ev, ev+1)
	switch e.what {
	case "arrive":
		if k.alive[e.node] && !k.deleted[e.id] {
			if k.ref.Num() == 0 {
				k.ref.Arrive(e.id, k.now)
			}
			if !slices.Contains(k.first, e.id) {
				k.first = append(k.first, e.id)
			}
		}
		k.deliver(e)
	case "rejoin":
		n := e.node + "'"
		k.alive[n] = true
		k.timed = append(k.timed, simTimed{at: k.now.Add(time.Duration(1+k.rng.IntN(300)) * time.Millisecond),
			e: simEvent{what: "arrive", id: e.id, node: n}})
	case "fail", "delete":
		k.faults++
		if k.r.Gating() {
			k.faultsGating++
		}
		k.deliver(e)
	default:
		k.deliver(e)
	}
	return true
}

func (k *kneeSim) fire(timer any) {
	switch timer.(type) {
	case DeadlineTimer:
		k.logf("deadline")
		if !k.slow && len(k.events) == 0 && !k.r.Gating() {
			held := 0
			for id, s := range k.r.sources {
				if (k.inline || k.alive[s.node.GetNodeId()]) && !k.deleted[id] {
					held++
				}
			}
			if held >= int(k.r.req.GetNumObjects()) {
				k.t.Fatalf("hang: %d sources are held, %d needed, and nothing but the deadline is left to happen\n%s",
					held, k.r.req.GetNumObjects(), k.dump())
			}
		}
		k.apply(k.r.Step(k.now, DeadlineTimer{}))
	case KneeTimer:
		k.checks++
		if k.checks > 1000 {
			k.t.Fatalf("the knee check fired %d times without deciding\n%s", k.checks, k.dump())
		}
		if k.ref.Num() == 0 {
			k.ref.Check(k.now)
		}
		k.logf("knee check at %v", k.now.Sub(t0))
		k.apply(k.r.Step(k.now, KneeTimer{}))
	case ResubscribeTimer:
		k.apply(k.r.Step(k.now, ResubscribeTimer{}))
	}
}

// invariants are the properties every step must keep.
func (k *kneeSim) invariants() {
	if k.r.Over() {
		return
	}
	if at, ok := k.timers[DeadlineTimer{}]; !ok || !at.Equal(k.r.Deadline()) {
		k.t.Fatalf("waiting without its deadline armed (armed %v at %v)\n%s", ok, at, k.dump())
	}
	if k.r.Gating() != (k.ref.Num() == 0) {
		k.t.Fatalf("gating %v, but the gate alone fixed %d (%s)\n%s", k.r.Gating(), k.ref.Num(), k.ref.Reason(), k.dump())
	}
	if !k.r.Gating() {
		if got := int(k.r.req.GetNumObjects()); got != k.ref.Num() {
			k.t.Fatalf("reduces %d, the gate alone fixed %d\n%s", got, k.ref.Num(), k.dump())
		}
		return
	}
	if nd := k.ref.NextDeadline(); !nd.IsZero() {
		at, ok := k.timers[KneeTimer{}]
		// A deadline that passed without a knee is asked again a
		// millisecond after the step that found it so.
		due := !nd.After(k.now) && !at.Before(k.now) && !at.After(k.now.Add(time.Millisecond))
		if !ok || !at.Equal(nd) && !due {
			k.t.Fatalf("the gate's next deadline is %v, the knee check is armed %v at %v (now %v)\n%s",
				nd.Sub(t0), ok, at.Sub(t0), k.now.Sub(t0), k.dump())
		}
	}
}

func (k *kneeSim) dump() string {
	return fmt.Sprintf("seed %d: knee %v of %d sources, slow %v, inline %v\n  %s", k.seed, k.r.req.GetKnee(), k.m, k.slow, k.inline,
		strings.Join(k.log, "\n  "))
}

func randomKnee(rng *rand.Rand, m int) *messages.ReduceKnee {
	k := &messages.ReduceKnee{MinPercent: []float64{0, 25, 50, 75, 100, rng.Float64() * 100}[rng.IntN(6)]}
	if rng.IntN(3) == 0 {
		k.MaxObjects = int32(minCount(k, m) + rng.IntN(m-minCount(k, m)+1))
	}
	if rng.IntN(3) == 0 {
		k.MinWaitMs = int64(rng.IntN(300))
	}
	k.Warmup = []int32{0, 0, 2, 3}[rng.IntN(4)]
	return k
}

// kneeStats counts what the seeds covered, so a change that makes the
// simulation stop reaching a path shows in the test's log.
type kneeStats map[string]int

func runKneeSim(t *testing.T, seed uint64, stats kneeStats) {
	rng := rand.New(rand.NewPCG(seed, 0x6b6e6565))
	m := 2 + rng.IntN(9)
	sources := ids("s", m)
	req := &messages.Reduce{TargetId: testTarget, SourceIds: sources, Knee: randomKnee(rng, m),
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}
	ref, err := NewKneeGate(req)
	if err != nil {
		t.Fatalf("seed %d: knee %v: %v", seed, req.GetKnee(), err)
	}
	timeout := time.Duration(50+rng.IntN(1950)) * time.Millisecond
	d := []int{0, 1, 2, 3, m}[rng.IntN(5)]
	s := &reduceSim{t: t, rng: rng, m: m, alive: map[string]bool{}, home: map[string]string{},
		workers: map[int]*simWorker{}, outputs: map[string]*simWorker{}, now: t0, timers: map[any]time.Time{}, deleted: map[string]bool{}}
	s.inline = rng.IntN(5) == 0
	// The caller's node fails in some seeds: nobody would get the answer.
	caller := &messages.NodeRef{NodeId: "caller"}
	s.alive["caller"] = true
	s.r = NewReductionFor(testReduceID, req, caller, Config{ForceDegree: d, InlineLimit: testInline}, t0, timeout, 100*time.Microsecond, 1.25e9)
	k := &kneeSim{reduceSim: s, seed: seed, ref: ref, slow: rng.IntN(5) == 0}
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
	// Arrival times: a fast group and stragglers, or spread evenly.
	fast := m
	if rng.IntN(3) > 0 {
		fast = 1 + rng.IntN(m)
	}
	order := rng.Perm(m)
	var last time.Duration
	for rank, i := range order {
		if rank < fast {
			last += ms(0, 8)
		} else {
			last += ms(20, 600)
		}
		node := fmt.Sprintf("n%d", i)
		s.alive[node], s.home[sources[i]] = true, node
		k.timed = append(k.timed, simTimed{at: t0.Add(last), e: simEvent{what: "arrive", id: sources[i], node: node}})
	}
	horizon := max(int(last/time.Millisecond), 10) + 200
	for _, i := range rng.Perm(m)[:rng.IntN(m)] {
		at := t0.Add(ms(0, horizon))
		node := fmt.Sprintf("n%d", i)
		k.timed = append(k.timed, simTimed{at: at, e: simEvent{what: "fail", node: node}})
		if rng.IntN(2) == 0 {
			k.timed = append(k.timed, simTimed{at: at, e: simEvent{what: "rejoin", id: sources[i], node: node}})
		}
	}
	if rng.IntN(8) == 0 {
		k.timed = append(k.timed, simTimed{at: t0.Add(ms(0, horizon)), e: simEvent{what: "fail", node: "caller"}})
	}
	if rng.IntN(3) == 0 {
		for _, i := range rng.Perm(m)[:1+rng.IntN(2)] {
			k.timed = append(k.timed, simTimed{at: t0.Add(ms(0, horizon)), e: simEvent{what: "delete", id: sources[i]}})
		}
	}
	s.apply(s.r.Step(t0, Begin{}))
	k.invariants()
	for steps := 0; k.step(); steps++ {
		if steps > 100_000 {
			t.Fatalf("no end after %d steps\n%s", steps, k.dump())
		}
		k.invariants()
		if t.Failed() {
			return
		}
	}
	k.checkEnd()
	outcome := k.reply.GetCompletedBy()
	if err := messages.AsError(messages.ErrOrNil(k.reply.GetError())); err != nil {
		outcome = err.GetCode().String()
		if k.ref.Num() == 0 {
			outcome += " while gating"
		}
	}
	stats[outcome]++
	stats[fmt.Sprintf("faults before the count was fixed: %v", k.faultsGating > 0)]++
	stats[fmt.Sprintf("faults after the count was fixed: %v", k.faults > k.faultsGating)]++
	if k.checks > 0 {
		stats["knee checks fired"]++
	}
	if k.inline {
		stats["inline"]++
	}
}

// checkEnd judges the answer.
func (k *kneeSim) checkEnd() {
	rep := k.reply
	if rep == nil || !k.r.Over() {
		k.t.Fatalf("the simulation ended without an answer\n%s", k.dump())
	}
	if k.ref.Num() > 0 && rep.GetCompletedBy() != k.ref.Reason() {
		k.t.Fatalf("completed_by %q, the gate's reason is %q\n%s", rep.GetCompletedBy(), k.ref.Reason(), k.dump())
	}
	if err := messages.ErrOrNil(rep.GetError()); err != nil {
		switch {
		case errors.Is(err, messages.ErrTimeout):
			if k.now.Before(k.r.Deadline()) {
				k.t.Fatalf("TIMEOUT before the deadline: %v\n%s", err, k.dump())
			}
			if gating := k.ref.Num() == 0; gating != strings.Contains(err.Error(), "knee policy") {
				k.t.Fatalf("TIMEOUT %q, with the count fixed: %v\n%s", err, !gating, k.dump())
			}
		case errors.Is(err, messages.ErrDeleted):
			gone := len(k.deleted)
			if gone == 0 {
				k.t.Fatalf("DELETED without a deletion: %v\n%s", err, k.dump())
			}
			if k.ref.Num() == 0 && k.m-gone >= k.ref.Needed() {
				k.t.Fatalf("DELETED while gating with %d of %d sources left, %d needed: %v\n%s", k.m-gone, k.m, k.ref.Needed(), err, k.dump())
			}
		case errors.Is(err, messages.ErrUnavailable) && !k.alive["caller"] && strings.Contains(err.Error(), "the caller's node caller failed"):
		default:
			k.t.Fatalf("the Reduce failed: %v\n%s", err, k.dump())
		}
		return
	}
	red := rep.GetReducedIds()
	if len(red) != k.ref.Num() || len(slices.Compact(slices.Sorted(slices.Values(red)))) != len(red) {
		k.t.Fatalf("reduced %v, want %d distinct\n%s", red, k.ref.Num(), k.dump())
	}
	for _, id := range red {
		if !slices.Contains(k.first, id) || k.deleted[id] && !k.lateDeleted[id] {
			k.t.Fatalf("reduced %q, which never arrived or was deleted\n%s", id, k.dump())
		}
	}
	if k.faults == 0 && !slices.Equal(slices.Sorted(slices.Values(red)), slices.Sorted(slices.Values(k.first[:len(red)]))) {
		k.t.Fatalf("reduced %v without faults, want the first arrivals %v\n%s", red, k.first[:len(red)], k.dump())
	}
}

// TestReductionKneeSimulated runs many seeded knee-policy Reduces
// (HOPLITE_REDUCE_SIM sets how many; HOPLITE_SEED replays one).
func TestReductionKneeSimulated(t *testing.T) {
	stats := kneeStats{}
	for _, seed := range simSeeds(t) {
		runKneeSim(t, seed, stats)
		if t.Failed() {
			return
		}
	}
	for _, k := range slices.Sorted(maps.Keys(stats)) {
		t.Logf("%5d  %s", stats[k], k)
	}
}
