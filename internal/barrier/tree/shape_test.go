package tree

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

func names(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}

// Every position but the root has one parent, whose children list it;
// Toward finds the path from any position down to any other in its
// subtree and nothing outside it; the depth is at most ⌈log2 n⌉.
func TestShapeIsATreeOfLogarithmicDepth(t *testing.T) {
	for _, k := range []int{2, 3, 4, 8} {
		for _, n := range []int{1, 2, 3, 7, 8, 9, 64, 100, 1024} {
			s, err := NewShape(names(n), k)
			if err != nil {
				t.Fatal(err)
			}
			seen := 1
			for i := 0; i < n; i++ {
				for _, c := range s.Children(i) {
					if s.Parent(c) != i {
						t.Fatalf("k=%d n=%d: child %d of %d has parent %d", k, n, c, i, s.Parent(c))
					}
					seen++
				}
			}
			if seen != n {
				t.Fatalf("k=%d n=%d: %d positions reachable from the root", k, n, seen)
			}
			if lg := int(math.Ceil(math.Log2(float64(n)))); s.Depth() > lg {
				t.Fatalf("k=%d n=%d: depth %d > ⌈log2 n⌉ = %d", k, n, s.Depth(), lg)
			}
			if n > 300 {
				continue
			}
			for i := 0; i < n; i++ {
				in := map[int]bool{}
				for _, p := range s.Subtree(i) {
					in[p] = true
				}
				for leaf := 0; leaf < n; leaf++ {
					c := s.Toward(i, leaf)
					switch {
					case leaf == i && c != -1, leaf != i && in[leaf] && s.Parent(c) != i, !in[leaf] && c != -2:
						t.Fatalf("k=%d n=%d: Toward(%d, %d) = %d (in subtree: %v)", k, n, i, leaf, c, in[leaf])
					}
					if c >= 0 && s.Toward(c, leaf) == -2 {
						t.Fatalf("k=%d n=%d: %d leads toward %d but does not hold it", k, n, c, leaf)
					}
				}
			}
		}
	}
}

func TestShapeRefusesBadInput(t *testing.T) {
	for _, c := range []struct {
		members []string
		k       int
	}{{nil, 2}, {[]string{"a"}, 1}, {[]string{"a"}, MaxFanout + 1}, {[]string{"a", "a"}, 2}, {[]string{"a", ""}, 2}} {
		if _, err := NewShape(c.members, c.k); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("NewShape(%q, %d) = %v, want INVALID_ARGUMENT", c.members, c.k, err)
		}
	}
	s, err := NewShape(RootFirst("c", []string{"a", "b", "c"}), 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.Member(0) != "c" || s.Len() != 3 {
		t.Fatalf("RootFirst: root %q, %d positions", s.Member(0), s.Len())
	}
	if p, ok := s.Position("b"); !ok || p != 2 {
		t.Fatalf("Position(b) = %d, %v", p, ok)
	}
	if s.Toward(0, 7) != -2 || s.Toward(-1, 0) != -2 {
		t.Fatal("Toward accepted a position outside the tree")
	}
}
