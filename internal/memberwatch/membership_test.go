package memberwatch

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func answer(host, id, view string) Check[string] {
	return Check[string]{Host: host, Answered: true, ID: id, Info: id, Ours: true, View: view}
}

var errTimeout = errors.New("timeout")

// A member that stops answering stays through Misses-1 misses and
// until the misses span the window; a refused connection drops it at
// once. The miss it left by is kept, as an UNAVAILABLE error.
func TestMissesDropAMemberOnlyAfterMissesAndWindow(t *testing.T) {
	m := New[string](Config{Misses: 3}, []string{"a:1", "b:1", "c:1"})
	m.Start("a:1", "a")
	window := 4 * time.Second
	m.Step(t0, Round[string]{Window: window, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", ""), answer("c:1", "c", "")}})
	if !m.Lists("b") || !m.Lists("c") {
		t.Fatalf("live %v, want b and c", m.Live())
	}
	miss := Check[string]{Host: "b:1", Err: errTimeout}
	// Three misses 100 ms apart: fewer than the window spans.
	for i := range 3 {
		res := m.Step(t0.Add(time.Duration(i+1)*100*time.Millisecond), Round[string]{Window: window, SelfUp: true, Checks: []Check[string]{miss}})
		if len(res.Dropped) > 0 || !m.Lists("b") {
			t.Fatalf("miss %d (within the window) dropped b: %+v", i+1, res)
		}
		if !m.Missing() {
			t.Fatalf("miss %d: Missing is false", i+1)
		}
	}
	res := m.Step(t0.Add(5*time.Second), Round[string]{Window: window, SelfUp: true, Checks: []Check[string]{miss}})
	if !slices.Equal(res.Dropped, []string{"b"}) || m.Lists("b") || !m.IsDead("b") {
		t.Fatalf("the fourth miss, past the window: dropped %v, live %v", res.Dropped, m.Live())
	}
	if err := m.HealthError("b"); !errors.Is(err, messages.ErrUnavailable) || !errors.Is(err, errTimeout) {
		t.Fatalf("HealthError(b) = %v, want an UNAVAILABLE miss wrapping the timeout", err)
	}
	// A dead incarnation does not come back with a stale roster.
	m.Step(t0.Add(6*time.Second), Merge[string]{})
	m.Step(t0.Add(6*time.Second), Round[string]{Window: window, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", "")}})
	if m.Lists("b") {
		t.Fatal("a dead id came back")
	}
	res = m.Step(t0.Add(7*time.Second), Round[string]{Window: window, SelfUp: true, Checks: []Check[string]{{Host: "c:1", Err: errTimeout, Refused: true}}})
	if !slices.Equal(res.Dropped, []string{"c"}) {
		t.Fatalf("a refused connection: dropped %v, want c at once", res.Dropped)
	}
}

// A member whose own endpoint did not answer counts no misses: it is
// the likelier one to be starved.
func TestNoMissCountsWhenSelfIsDown(t *testing.T) {
	m := New[string](Config{Misses: 1}, []string{"b:1"})
	m.Start("a:1", "a")
	m.Step(t0, Round[string]{Window: 0, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", "")}})
	res := m.Step(t0.Add(time.Second), Round[string]{Window: 0, SelfUp: false, Checks: []Check[string]{{Host: "b:1", Err: errTimeout, Refused: true}}})
	if len(res.Dropped) > 0 || !m.Lists("b") {
		t.Fatalf("dropped %v with self down", res.Dropped)
	}
}

// A digest that differs is a pull; an equal one, or NoPull, is not.
// A miss goes to indirect probes only when a member is listed there
// and the connection was not refused; the helpers are neither self nor
// the target.
func TestPullsAndIndirectProbes(t *testing.T) {
	m := New[string](Config{}, []string{"b:1", "c:1", "d:1", "e:1"})
	m.Start("a:1", "a")
	res := m.Step(t0, Round[string]{Window: 0, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", "ffff"), answer("c:1", "c", ""), answer("d:1", "d", ""), answer("e:1", "e", "")}})
	if !slices.Equal(res.Pulls, []string{"b:1"}) {
		t.Fatalf("pulls %v, want b:1 (its view differs; the others sent none)", res.Pulls)
	}
	mine := DigestString(m.Digest())
	if res := m.Step(t0, Round[string]{Window: 0, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", mine)}}); len(res.Pulls) > 0 {
		t.Fatalf("pulls %v with equal views", res.Pulls)
	}
	np := New[string](Config{NoPull: true}, []string{"b:1"})
	np.Start("a:1", "a")
	if res := np.Step(t0, Round[string]{Window: 0, SelfUp: true, Checks: []Check[string]{answer("b:1", "b", "ffff")}}); len(res.Pulls) > 0 {
		t.Fatalf("NoPull pulled %v", res.Pulls)
	}
	if id, ok := m.Indirect(Check[string]{Host: "b:1", Err: errTimeout}); !ok || id != "b" {
		t.Fatalf("Indirect(timeout at b) = %q, %v; want b, true", id, ok)
	}
	if _, ok := m.Indirect(Check[string]{Host: "b:1", Err: errTimeout, Refused: true}); ok {
		t.Fatal("a refused connection went to indirect probes")
	}
	if _, ok := m.Indirect(Check[string]{Host: "z:1", Err: errTimeout}); ok {
		t.Fatal("an endpoint nobody is listed at went to indirect probes")
	}
	via := m.Helpers("b:1", "b", nil)
	if len(via) != 3 || slices.Contains(via, "b:1") || slices.Contains(via, "a:1") {
		t.Fatalf("helpers %v, want three of c, d, e", via)
	}
}

// Learned endpoints are bounded, checked once in the next round
// whatever their place, and only they are forgotten.
func TestLearnBoundsAndFreshTargets(t *testing.T) {
	m := New[string](Config{MaxLearned: 2}, []string{"s:1"})
	m.Start("a:1", "a")
	added, invalid, full := m.Learn([]string{"x:1", "bad", "y:1", "z:1", "s:1"}, func(h string) error {
		if h == "bad" {
			return errors.New("bad")
		}
		return nil
	})
	if !slices.Equal(added, []string{"x:1", "y:1"}) || invalid != 1 || full != 1 {
		t.Fatalf("Learn: added %v, invalid %d, full %d", added, invalid, full)
	}
	first := m.Targets()
	for _, h := range []string{"s:1", "x:1", "y:1"} {
		if !slices.Contains(first, h) {
			t.Fatalf("the first round's targets %v miss %s", first, h)
		}
	}
	if gone := m.Forget([]string{"s:1", "x:1"}); !slices.Equal(gone, []string{"x:1"}) {
		t.Fatalf("Forget forgot %v, want x:1 only (s:1 is configured)", gone)
	}
	if m.Known("x:1") || !m.Known("s:1") {
		t.Fatal("Known after Forget")
	}
}

// The pace doubles while nothing changes, up to QuietFactor times
// base; a change or a kick brings it back.
func TestPace(t *testing.T) {
	p := NewPace(100 * time.Millisecond)
	var got []time.Duration
	for range 6 {
		got = append(got, p.Next(false))
	}
	want := []time.Duration{200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("quiet waits %v, want %v ms", got, want)
		}
	}
	p.Kick()
	if p.Current() != 100*time.Millisecond || p.Next(true) != 100*time.Millisecond {
		t.Fatal("a kick or a change did not bring the pace back to base")
	}
}

// Targets are revoke.MonitorTargets' round by round, as the hosts grow
// and shrink.
func TestTargetsAreMonitorTargets(t *testing.T) {
	var seeds []string
	for i := range 40 {
		seeds = append(seeds, fmt.Sprintf("h%02d:1", i))
	}
	m := New[string](Config{}, seeds[:20])
	m.Start("h05:1", "m05")
	for r := range 60 {
		switch r {
		case 20:
			m.Learn(seeds[20:], nil)
		case 40:
			m.Forget(seeds[30:])
		}
		hosts := m.Hosts()
		fresh := slices.Clone(m.fresh)
		got := m.Targets()
		want := revoke.MonitorTargets(hosts, "h05:1", uint64(r))
		for _, h := range fresh {
			if h != "h05:1" && !slices.Contains(want, h) {
				want = append(want, h)
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: targets %v, want %v", r, got, want)
		}
	}
}

// A Merge that brings a member changes the live set, one that brings
// nothing new does not; neither asks its shell for anything in the Box.
func TestStepMergeReportsChange(t *testing.T) {
	m := New[string](Config{}, []string{"a:1"})
	m.Start("a:1", "a")
	live := []revoke.RosterEntry[string]{{ID: "b", Host: "b:1"}}
	if o := m.Step(t0, Merge[string]{Live: live}); !o.Changed || !o.Empty() {
		t.Fatalf("first merge: %+v, want changed and an empty Box", o)
	}
	if o := m.Step(t0.Add(time.Second), Merge[string]{Live: live}); o.Changed {
		t.Fatalf("the same roster again: %+v, want no change", o)
	}
	if !m.Lists("b") {
		t.Fatal("the merged member is not listed")
	}
}
