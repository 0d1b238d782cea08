package tree

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
	"google.golang.org/protobuf/proto"
)

const fired = messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED

// A traditional barrier on the tree: each position sends its parent one
// message and gets one back, so the root takes in k messages, not n;
// every label passes exactly once, at the member it entered at, within
// twice the tree's depth of hops.
func TestTraditionalBarrierCombinesOneMessagePerEdge(t *testing.T) {
	for _, c := range []struct{ n, k int }{{2, 2}, {9, 2}, {64, 4}, {100, 3}, {1024, 4}} {
		t.Run(fmt.Sprintf("n=%d,k=%d", c.n, c.k), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.n), uint64(c.k)))
			w := newNet(t, c.n, c.k, policy.Options{MaxParticipants: c.n}, nil, rng)
			for _, p := range rng.Perm(c.n) {
				if len(w.got) != 0 {
					t.Fatalf("a label passed before %d entered", p)
				}
				w.enter(p, fmt.Sprintf("task-%d", p))
			}
			if len(w.got) != c.n {
				t.Fatalf("%d of %d labels passed", len(w.got), c.n)
			}
			for p := 0; p < c.n; p++ {
				l := fmt.Sprintf("task-%d", p)
				if o := w.got[l]; o.GetKind() != fired || o.GetReason() != "max" || w.gotAt[l] != p {
					t.Fatalf("%s: %v (%s) at position %d", l, o.GetKind(), o.GetReason(), w.gotAt[l])
				}
			}
			if w.msgs != 2*(c.n-1) {
				t.Errorf("%d messages, want %d (one up and one down per edge)", w.msgs, 2*(c.n-1))
			}
			if want := len(w.shape.Children(0)); w.toRoot != want {
				t.Errorf("the root took in %d messages, want %d", w.toRoot, want)
			}
			if w.maxHops > 2*w.shape.Depth() {
				t.Errorf("%d hops, more than twice the depth %d", w.maxHops, w.shape.Depth())
			}
		})
	}
}

// arrival is one entry of a scripted run: label enters at position pos
// at offset at.
type arrival struct {
	at    time.Duration
	pos   int
	label string
}

type result struct {
	kind messages.BarrierOutcomeKind
	at   time.Duration
}

// flat runs the arrivals on one policy.Barrier, as one manager taking
// every Enter itself does.
func flat(t *testing.T, o policy.Options, as []arrival, end time.Duration) (map[string]result, policy.FireReason) {
	t.Helper()
	b, err := policy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	got := map[string]result{}
	note := func(d policy.Decision, now time.Time) {
		for _, x := range []struct {
			l []string
			k messages.BarrierOutcomeKind
		}{{d.Release, fired}, {d.LateFire, messages.BarrierOutcomeKind_BARRIER_OUTCOME_LATE_FIRE},
			{d.CatchUp, messages.BarrierOutcomeKind_BARRIER_OUTCOME_CATCH_UP}, {d.TimedOut, messages.BarrierOutcomeKind_BARRIER_OUTCOME_TIMED_OUT}} {
			for _, l := range x.l {
				got[l] = result{x.k, now.Sub(t0)}
			}
		}
	}
	upTo := func(at time.Time) {
		for dl := b.NextDeadline(); !dl.IsZero() && !dl.After(at); dl = b.NextDeadline() {
			note(b.Step(dl, policy.Tick{}), dl)
		}
	}
	for _, a := range as {
		now := t0.Add(a.at)
		upTo(now)
		d := b.Step(now, policy.Enter{Label: a.label})
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		note(d, now)
	}
	upTo(t0.Add(end))
	_, r := b.Fired()
	return got, r
}

// On a barrier that may fire early, release at a throttled pace or
// send late labels away, every position forwards at once: the root's
// policy sees the arrivals as the flat manager does and decides the
// same, label by label, at the same times.
func TestPartialBarriersDecideOnTheTreeAsOnOneManager(t *testing.T) {
	const n = 40
	knee := func(i int) time.Duration { // most arrive in a burst, a few straggle
		if i < 32 {
			return time.Duration(i) * time.Millisecond
		}
		return time.Duration(200+40*i) * time.Millisecond
	}
	spread := func(i int) time.Duration { return time.Duration(i*i) * time.Millisecond / 4 }
	cases := []struct {
		name string
		o    policy.Options
		at   func(int) time.Duration
	}{
		{"timeout, late pass through", policy.Options{MaxParticipants: n, Timeout: 150 * time.Millisecond}, spread},
		{"timeout, catch up", policy.Options{MaxParticipants: n, Timeout: 150 * time.Millisecond, LateMode: policy.CatchUp}, spread},
		{"percent and min wait", policy.Options{MaxParticipants: n, MinPercent: 50, MinWait: 80 * time.Millisecond}, spread},
		{"knee", policy.Options{MaxParticipants: n, FireOnKnee: true, MinPercent: 50}, knee},
		{"throttled release", policy.Options{MaxParticipants: n, Throttle: &policy.Throttle{Count: 3, Interval: 5 * time.Millisecond}}, spread},
		{"throttled after a timeout", policy.Options{MaxParticipants: n, Timeout: 100 * time.Millisecond,
			Throttle: &policy.Throttle{Percent: 10, Interval: 20 * time.Millisecond}}, spread},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if ModeFor(c.o) != AtOnce {
				t.Fatalf("mode %v, want at-once", ModeFor(c.o))
			}
			rng := rand.New(rand.NewPCG(7, 7))
			var as []arrival
			for i, p := range rng.Perm(n) {
				as = append(as, arrival{c.at(i), p, fmt.Sprintf("task-%d", p)})
			}
			sort.SliceStable(as, func(i, j int) bool { return as[i].at < as[j].at })
			end := as[len(as)-1].at + time.Second
			want, reason := flat(t, c.o, as, end)

			w := newNet(t, n, 3, c.o, nil, nil)
			t0 := w.now
			for _, a := range as {
				w.advance(t0.Add(a.at).Sub(w.now))
				w.enter(a.pos, a.label)
			}
			w.advance(t0.Add(end).Sub(w.now))
			if _, r := w.b.Fired(); r != reason {
				t.Fatalf("fired for %v on the tree, %v on one manager", r, reason)
			}
			if len(w.got) != len(want) {
				t.Fatalf("%d outcomes on the tree, %d on one manager", len(w.got), len(want))
			}
			for l, r := range want {
				o := w.got[l]
				if o == nil || o.GetKind() != r.kind || w.gotWhen[l].Sub(t0) != r.at {
					t.Fatalf("%s: %v at %v on the tree, %v at %v on one manager", l, o.GetKind(), w.gotWhen[l].Sub(t0), r.kind, r.at)
				}
				if pos := w.gotAt[l]; w.shape.Member(pos) != "m"+l[len("task-"):] {
					t.Fatalf("%s's outcome reached position %d", l, pos)
				}
			}
		})
	}
}

// A semaphore barrier on the tree admits k holders, the next label in
// arrival order when one leaves, and sends a timed-out holder's
// outcome to the member it entered at.
func TestSemaphoreOnTheTree(t *testing.T) {
	o := policy.Options{MaxParticipants: 6, Semaphore: &policy.Semaphore{Count: 2, HolderTimeout: time.Second}}
	w := newNet(t, 6, 2, o, nil, nil)
	for _, p := range []int{5, 3, 1, 4} {
		w.enter(p, fmt.Sprintf("task-%d", p))
	}
	if len(w.got) != 2 || w.got["task-5"].GetKind() != fired || w.got["task-3"].GetKind() != fired {
		t.Fatalf("admitted %v, want task-5 and task-3", w.got)
	}
	w.release("task-3")
	if w.got["task-1"].GetKind() != fired || w.got["task-4"] != nil || w.gotAt["task-1"] != 1 {
		t.Fatalf("after task-3 left: %v", w.got)
	}
	w.advance(time.Second)
	if w.got["task-5"].GetKind() != messages.BarrierOutcomeKind_BARRIER_OUTCOME_TIMED_OUT || w.gotAt["task-5"] != 5 {
		t.Fatalf("task-5 held past its timeout: %v at %d", w.got["task-5"].GetKind(), w.gotAt["task-5"])
	}
	if w.got["task-4"].GetKind() != fired {
		t.Fatal("task-4 was not admitted into the timed-out holder's slot")
	}
}

// A traditional barrier counted on one participant at each member, but
// one entered at another member than expected: the position short of
// its count sends what it has Linger after its first arrival, and the
// barrier fires.
func TestHoldingPositionLetsGoAfterLinger(t *testing.T) {
	const n = 16
	o := policy.Options{MaxParticipants: n}
	w := newNet(t, n, 2, o, nil, nil)
	for p := 0; p < n; p++ {
		if p == 11 {
			continue // its participant enters at 14, under another parent
		}
		w.enter(p, fmt.Sprintf("task-%d", p))
	}
	w.enter(14, "task-11")
	if len(w.got) != 0 {
		t.Fatal("fired before the short position let go")
	}
	if w.nodes[5].Holding() == 0 {
		t.Fatal("position 5 (the parent of 11) holds nothing")
	}
	w.advance(time.Duration(w.shape.Depth()) * DefaultLinger)
	if len(w.got) != n {
		t.Fatalf("%d of %d passed after the linger", len(w.got), n)
	}
	if w.gotAt["task-11"] != 14 {
		t.Fatalf("task-11's outcome reached %d, not where it entered", w.gotAt["task-11"])
	}
}

// Messages that do not fit the tree are refused with INVALID_ARGUMENT
// and change nothing.
func TestNodeRefusesMessagesThatDoNotFitTheTree(t *testing.T) {
	s, err := NewShape(names(10), 3)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := NewNode(Config{Name: "b", Shape: s, Self: 1, Mode: Hold, Max: 10})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1, 0)
	bad := []any{
		Enter{},
		&messages.BarrierArrivals{From: 2, Arrivals: []*messages.BarrierArrival{{Label: "x", Leaf: 2}}},                        // 2 is 1's sibling
		&messages.BarrierArrivals{From: 4, Arrivals: []*messages.BarrierArrival{{Label: "x", Leaf: 4}, {Label: "y", Leaf: 7}}}, // 7 is under 2
		&messages.BarrierArrivals{From: 4, Arrivals: []*messages.BarrierArrival{{Label: "", Leaf: 4}}},                         // no label
		&messages.BarrierReleases{From: 2, Outcomes: []*messages.BarrierOutcome{{Label: "x", Leaf: 4}}},                        // not the parent
		&messages.BarrierReleases{From: 0, Outcomes: []*messages.BarrierOutcome{{Label: "x", Leaf: 4}, {Label: "y", Leaf: 9}}}, // 9 is under 2
		Release{Outcomes: []*messages.BarrierOutcome{{Label: "x", Leaf: 1}}},                                                   // not the root
		"something else",
	}
	for _, ev := range bad {
		out := nd.Step(now, ev)
		err := out.Err
		if !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", ev, err)
		}
		if !out.Empty() || len(out.Local) != 0 || nd.Holding() != 0 {
			t.Errorf("%v: a refused event did something: %+v, holding %d", ev, out, nd.Holding())
		}
	}
	for _, cfg := range []Config{{Shape: s, Self: 10, Max: 1}, {Shape: s, Max: 0}, {Max: 1}, {Shape: s, Max: 1, Expect: []int{1}},
		{Shape: s, Max: 1, Mode: Mode(7)}, {Shape: s, Max: 1, Linger: -1}} {
		if _, err := NewNode(cfg); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("NewNode(%+v) = %v, want INVALID_ARGUMENT", cfg, err)
		}
	}
}

// FuzzNodeStep feeds a position arbitrary bytes as a child's arrivals
// or the parent's releases: it refuses or takes them, never panics, and
// never holds more than the barrier takes.
func FuzzNodeStep(f *testing.F) {
	seed, _ := proto.Marshal(&messages.BarrierArrivals{From: 4, Arrivals: []*messages.BarrierArrival{{Label: "x", Leaf: 4}}})
	f.Add(seed, false)
	seed, _ = proto.Marshal(&messages.BarrierReleases{From: 0, Outcomes: []*messages.BarrierOutcome{{Label: "x", Leaf: 4, Kind: fired}}})
	f.Add(seed, true)
	s, err := NewShape(names(13), 3)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte, releases bool) {
		nd, err := NewNode(Config{Name: "b", Shape: s, Self: 1, Mode: Hold, Max: 5})
		if err != nil {
			t.Fatal(err)
		}
		var m proto.Message = &messages.BarrierArrivals{}
		if releases {
			m = &messages.BarrierReleases{}
		}
		if proto.Unmarshal(b, m) != nil {
			return
		}
		for i := 0; i < 3; i++ {
			if err := nd.Step(time.Unix(int64(i), 0), m).Err; err != nil && !errors.Is(err, messages.ErrInvalidArgument) {
				t.Fatalf("untyped error %v", err)
			}
			if nd.Holding() > 5 {
				t.Fatalf("holding %d, more than the barrier takes", nd.Holding())
			}
		}
	})
}

// With Coalesce, a position that would forward at once asks for a Flush
// due now and sends everything that reached it before that Flush in one
// message; without, each arrival goes up alone.
func TestCoalesceSendsWhatArrivedTogether(t *testing.T) {
	s, err := NewShape(names(5), 4)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1, 0)
	for _, coalesce := range []bool{false, true} {
		nd, err := NewNode(Config{Name: "b", Shape: s, Self: 2, Mode: AtOnce, Max: 10, Coalesce: coalesce})
		if err != nil {
			t.Fatal(err)
		}
		var sent []*messages.BarrierArrivals
		flushes := 0
		for _, l := range []string{"x", "y", "z"} {
			out := nd.Step(now, Enter{Label: l})
			err := out.Err
			if err != nil {
				t.Fatal(err)
			}
			flushes += len(out.Timers)
			for _, snd := range out.Sends {
				sent = append(sent, snd.Msg.(*messages.BarrierArrivals))
			}
		}
		if !coalesce {
			if len(sent) != 3 || flushes != 0 {
				t.Fatalf("at once: %d messages, %d flushes; want 3, 0", len(sent), flushes)
			}
			continue
		}
		if len(sent) != 0 || flushes != 1 {
			t.Fatalf("coalescing: %d messages before the flush, %d flushes armed; want 0, 1", len(sent), flushes)
		}
		out := nd.Step(now, Flush{})
		err = out.Err
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Sends) != 1 || len(out.Sends[0].Msg.(*messages.BarrierArrivals).GetArrivals()) != 3 {
			t.Fatalf("the flush sent %v, want one message of 3 arrivals", out.Sends)
		}
	}
}
