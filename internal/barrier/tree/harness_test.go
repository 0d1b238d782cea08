package tree

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
)

// net runs one barrier's whole tree in memory: every position's Node,
// the policy at the root, messages delivered in order (shuffled within
// an instant when rng is set) with no delay, timers and the policy's
// deadlines at their times.
type net struct {
	t       *testing.T
	shape   *Shape
	nodes   []*Node
	b       *policy.Barrier
	ledger  *Ledger
	now     time.Time
	rng     *rand.Rand
	queue   []delivery
	timers  map[int]time.Time // position -> armed Flush
	got     map[string]*messages.BarrierOutcome
	gotAt   map[string]int // label -> position its outcome reached
	gotWhen map[string]time.Time
	hops    map[string]int // label -> hops from its entry to its outcome
	up      map[string]int // label -> hops its arrival took
	toRoot  int            // messages the root took in
	msgs    int
	maxHops int
}

type delivery struct {
	to   int
	ev   any
	hops int
}

func newNet(t *testing.T, n, k int, o policy.Options, expect []int, rng *rand.Rand) *net {
	t.Helper()
	s, err := NewShape(names(n), k)
	if err != nil {
		t.Fatal(err)
	}
	b, err := policy.New(o)
	if err != nil {
		t.Fatal(err)
	}
	w := &net{t: t, shape: s, b: b, ledger: NewLedger(o.MaxParticipants), now: time.Unix(1000, 0), rng: rng,
		timers: map[int]time.Time{}, got: map[string]*messages.BarrierOutcome{}, gotAt: map[string]int{},
		gotWhen: map[string]time.Time{}, hops: map[string]int{}, up: map[string]int{}}
	for i := 0; i < n; i++ {
		nd, err := NewNode(Config{Name: "b", Shape: s, Self: i, Mode: ModeFor(o), Expect: expect, Max: o.MaxParticipants})
		if err != nil {
			t.Fatal(err)
		}
		w.nodes = append(w.nodes, nd)
	}
	return w
}

// enter has label enter at position pos now, and runs the tree until
// it is quiet.
func (w *net) enter(pos int, label string) {
	w.queue = append(w.queue, delivery{to: pos, ev: Enter{Label: label, Host: w.shape.Member(pos)}})
	w.run()
}

// release tells the root's policy that a semaphore holder left.
func (w *net) release(label string) {
	d := w.b.Step(w.now, policy.Release{Label: label})
	if d.Err != nil {
		w.t.Fatalf("release %s: %v", label, d.Err)
	}
	w.decided(d, 0)
	w.run()
}

// advance moves time on by d, firing timers and the policy's deadlines
// in order.
func (w *net) advance(d time.Duration) {
	end := w.now.Add(d)
	for {
		next := w.b.NextDeadline()
		for _, at := range w.timers {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
		if next.IsZero() || next.After(end) {
			break
		}
		w.now = maxTime(w.now, next)
		for pos, at := range w.timers {
			if !at.After(w.now) {
				delete(w.timers, pos)
				w.queue = append(w.queue, delivery{to: pos, ev: Flush{}})
			}
		}
		if dl := w.b.NextDeadline(); !dl.IsZero() && !dl.After(w.now) {
			w.decided(w.b.Step(w.now, policy.Tick{}), 0)
		}
		w.run()
	}
	w.now = end
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (w *net) run() {
	for len(w.queue) > 0 {
		i := 0
		if w.rng != nil {
			i = w.rng.IntN(len(w.queue))
		}
		d := w.queue[i]
		w.queue = slices.Delete(w.queue, i, i+1)
		out := w.nodes[d.to].Step(w.now, d.ev)
		err := out.Err
		if err != nil {
			w.t.Fatalf("position %d, %T: %v", d.to, d.ev, err)
		}
		w.carry(d.to, out, d.hops)
	}
}

func (w *net) carry(from int, out Output, hops int) {
	for _, tm := range out.Timers {
		w.timers[from] = tm.At
	}
	for _, s := range out.Sends {
		to, ok := w.shape.Position(s.To.(string))
		if !ok {
			w.t.Fatalf("send to %v, not a member", s.To)
		}
		w.msgs++
		if to == 0 {
			w.toRoot++
		}
		w.queue = append(w.queue, delivery{to: to, ev: s.Msg, hops: hops + 1})
	}
	for _, a := range out.Arrivals {
		w.up[a.GetLabel()] = hops
		d := w.b.Step(w.now, policy.Enter{Label: a.GetLabel(), Host: a.GetHost()})
		if d.Err != nil {
			w.t.Fatalf("enter %s at the root: %v", a.GetLabel(), d.Err)
		}
		w.ledger.Note(a)
		w.decided(d, hops)
	}
	for _, o := range out.Local {
		if prev := w.got[o.GetLabel()]; prev != nil && prev.GetKind() != messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED {
			w.t.Fatalf("%s got %v after %v", o.GetLabel(), o.GetKind(), prev.GetKind())
		}
		w.got[o.GetLabel()], w.gotAt[o.GetLabel()], w.gotWhen[o.GetLabel()] = o, from, w.now
		h := w.up[o.GetLabel()] + hops
		w.hops[o.GetLabel()] = h
		w.maxHops = max(w.maxHops, h)
	}
}

// decided sends the policy's decision down the tree from the root.
func (w *net) decided(d policy.Decision, hops int) {
	_, reason := w.b.Fired()
	outs := w.ledger.Outcomes(d, reason.String(), 1)
	if len(outs) == 0 {
		return
	}
	out := w.nodes[0].Step(w.now, Release{Outcomes: outs})
	err := out.Err
	if err != nil {
		w.t.Fatalf("release at the root: %v", err)
	}
	w.carry(0, out, 0)
}
