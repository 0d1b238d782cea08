package reduction

import (
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/internal/directory"
)

// TestReduceTreeNamesOutputs: each position of a published tree names
// the object it makes on its node, which the live view reads its
// progress from: the root the target, a leaf its own source, a position
// between an internal object of this Reduce.
func TestReduceTreeNamesOutputs(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c"}, 3), Config{ForceDegree: 1})
	r.Step(t0, located("a", bigSize, node(0)))
	r.Step(t0, located("b", bigSize, node(1)))
	ev := treeOf(r.Step(t0, located("c", bigSize, node(2))))
	if ev == nil || len(ev.Positions) != 3 {
		t.Fatalf("tree %+v", ev)
	}
	parents := map[int]bool{}
	for _, p := range ev.Positions {
		parents[p.Parent] = true
	}
	inner := 0
	for _, p := range ev.Positions {
		switch {
		case p.Parent < 0:
			if p.Output != ev.Target {
				t.Fatalf("the root %+v makes %q, want the target %q", p, p.Output, ev.Target)
			}
		case !parents[p.Position]:
			if p.Output != p.Object {
				t.Fatalf("the leaf %+v makes %q, want its source", p, p.Output)
			}
		default:
			inner++
			if !strings.HasPrefix(p.Output, directory.InternalPrefix) || !strings.Contains(p.Output, ev.Reduce) {
				t.Fatalf("the inner position %+v makes %q, want an internal object of %s", p, p.Output, ev.Reduce)
			}
		}
	}
	if inner != 1 {
		t.Fatalf("a chain of 3 has %d inner positions: %+v", inner, ev.Positions)
	}
}
