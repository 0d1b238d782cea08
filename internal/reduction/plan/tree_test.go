package plan

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// perfectSize is (d^(h+1)-1)/(d-1), the size of a perfect d-ary tree of
// height h, recomputed here independently of the implementation.
func perfectSize(d, h int) int {
	s, pow := 0, 1
	for i := 0; i <= h; i++ {
		s += pow
		pow *= d
	}
	return s
}

// minHeight is the least height any tree of n nodes with degree <= d can
// have: the smallest h with perfectSize(d, h) >= n.
func minHeight(n, d int) int {
	h := 0
	for perfectSize(d, h) < n {
		h++
	}
	return h
}

// ceilLog is the smallest h with d^h >= n (d >= 2).
func ceilLog(n, d int) int {
	h, p := 0, 1
	for p < n {
		p *= d
		h++
	}
	return h
}

// inOrder walks t from the root in generalized in-order using only Root
// and Children.
func inOrder(t *Tree) []int {
	var out []int
	var walk func(p int)
	walk = func(p int) {
		cs := t.Children(p)
		if len(cs) == 0 {
			out = append(out, p)
			return
		}
		walk(cs[0])
		out = append(out, p)
		for _, c := range cs[1:] {
			walk(c)
		}
	}
	walk(t.Root())
	return out
}

func subtree(t *Tree, p int) []int {
	out := []int{p}
	for i := 0; i < len(out); i++ {
		out = append(out, t.Children(out[i])...)
	}
	return out
}

// checkValid asserts the structural invariants shared by both shapes.
func checkValid(t *testing.T, tr *Tree, n, maxChildren int) {
	t.Helper()
	if tr.N() != n {
		t.Fatalf("N() = %d, want %d", tr.N(), n)
	}
	roots := 0
	for p := 0; p < n; p++ {
		par := tr.Parent(p)
		if par == -1 {
			roots++
			if p != tr.Root() {
				t.Fatalf("position %d has no parent but Root() = %d", p, tr.Root())
			}
			if tr.Depth(p) != 0 {
				t.Fatalf("root depth = %d", tr.Depth(p))
			}
		} else {
			if par < 0 || par >= n {
				t.Fatalf("Parent(%d) = %d out of range", p, par)
			}
			if !slices.Contains(tr.Children(par), p) {
				t.Fatalf("Parent(%d) = %d but Children(%d) = %v", p, par, par, tr.Children(par))
			}
			if tr.Depth(p) != tr.Depth(par)+1 {
				t.Fatalf("Depth(%d) = %d, parent depth %d", p, tr.Depth(p), tr.Depth(par))
			}
		}
		cs := tr.Children(p)
		if len(cs) > maxChildren {
			t.Fatalf("Children(%d) = %v exceeds %d", p, cs, maxChildren)
		}
		for _, c := range cs {
			if tr.Parent(c) != p {
				t.Fatalf("Children(%d) contains %d whose parent is %d", p, c, tr.Parent(c))
			}
		}
		// Generalized in-order: first child subtree < p < later subtrees,
		// increasing; so a node with children always has one before it.
		if len(cs) > 0 {
			if _, hi := tr.Span(cs[0]); hi >= p {
				t.Fatalf("first child subtree of %d ends at %d, not before it", p, hi)
			}
			prev := p
			for _, c := range cs[1:] {
				lo, hi := tr.Span(c)
				if lo != prev+1 {
					t.Fatalf("child %d of %d spans [%d,%d], want to start at %d", c, p, lo, hi, prev+1)
				}
				prev = hi
			}
		}
		// Span must be exactly the subtree's positions.
		sub := subtree(tr, p)
		slices.Sort(sub)
		lo, hi := tr.Span(p)
		if sub[0] != lo || sub[len(sub)-1] != hi || len(sub) != hi-lo+1 {
			t.Fatalf("Span(%d) = [%d,%d] but subtree is %v", p, lo, hi, sub)
		}
		// Ancestors is the parent chain up to the root.
		anc := tr.Ancestors(p)
		want := []int{}
		for q := tr.Parent(p); q != -1; q = tr.Parent(q) {
			want = append(want, q)
		}
		if !slices.Equal(anc, want) || len(anc) != tr.Depth(p) {
			t.Fatalf("Ancestors(%d) = %v, want %v", p, anc, want)
		}
	}
	if roots != 1 {
		t.Fatalf("%d roots, want 1", roots)
	}
	order := inOrder(tr)
	if len(order) != n {
		t.Fatalf("in-order walk reaches %d positions, want %d", len(order), n)
	}
	for i, p := range order {
		if p != i {
			t.Fatalf("in-order walk = %v, want 0..%d", order, n-1)
		}
	}
	maxDepth := 0
	for p := 0; p < n; p++ {
		maxDepth = max(maxDepth, tr.Depth(p))
	}
	if tr.Height() != maxDepth {
		t.Fatalf("Height() = %d, max depth %d", tr.Height(), maxDepth)
	}
}

// checkPrefixes asserts what in-order placement promises for every prefix
// of k arrivals (positions 0..k-1 held): each held position either lies in
// a complete subtree or is an ancestor of position k, the next to arrive.
// So at most Depth(k) held objects wait, the rest can already reduce.
func checkPrefixes(t *testing.T, tr *Tree) {
	t.Helper()
	n := tr.N()
	for k := 0; k <= n; k++ {
		for p := 0; p < k; p++ {
			complete := true
			for _, q := range subtree(tr, p) {
				if q >= k {
					complete = false
					break
				}
			}
			if complete {
				continue
			}
			if k == n || !slices.Contains(tr.Ancestors(k), p) {
				t.Fatalf("prefix %d: held position %d is neither complete nor an ancestor of %d", k, p, k)
			}
		}
	}
	if n > 0 && len(tr.Children(0)) != 0 {
		t.Fatalf("position 0 has children %v; the first arrival must be complete alone", tr.Children(0))
	}
}

func TestNewTreeExhaustive(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, d := range []int{1, 2, 3, 4, n} {
			t.Run(fmt.Sprintf("n=%d/d=%d", n, d), func(t *testing.T) {
				tr, err := NewTree(n, d)
				if err != nil {
					t.Fatal(err)
				}
				if tr.Degree() != d {
					t.Fatalf("Degree() = %d, want %d", tr.Degree(), d)
				}
				checkValid(t, tr, n, d)
				checkPrefixes(t, tr)
				if d == 1 {
					if tr.Height() != n-1 || tr.Root() != n-1 {
						t.Fatalf("chain: height %d root %d, want %d and %d", tr.Height(), tr.Root(), n-1, n-1)
					}
					for p := 0; p < n-1; p++ {
						if tr.Parent(p) != p+1 {
							t.Fatalf("chain: Parent(%d) = %d, want %d", p, tr.Parent(p), p+1)
						}
					}
					return
				}
				// Height is the minimum any degree-d tree of n nodes can
				// have, hence also at most ceil(log_d n).
				if want := minHeight(n, d); tr.Height() != want {
					t.Fatalf("Height() = %d, want minimum %d", tr.Height(), want)
				}
				if tr.Height() > ceilLog(n, d) {
					t.Fatalf("Height() = %d > ceil(log_%d %d) = %d", tr.Height(), d, n, ceilLog(n, d))
				}
				// The first perfectSize(d,h) arrivals form a perfect
				// subtree of height h rooted at perfectSize(d,h-1).
				for h := 1; perfectSize(d, h) <= n; h++ {
					r := perfectSize(d, h-1)
					lo, hi := tr.Span(r)
					if lo != 0 || hi != perfectSize(d, h)-1 {
						t.Fatalf("Span(%d) = [%d,%d], want [0,%d]", r, lo, hi, perfectSize(d, h)-1)
					}
					for _, q := range subtree(tr, r) {
						leaf := len(tr.Children(q)) == 0
						if leaf != (tr.Depth(q)-tr.Depth(r) == h) || (!leaf && len(tr.Children(q)) != d) {
							t.Fatalf("subtree at %d of height %d is not perfect at %d", r, h, q)
						}
					}
				}
				if d == n && n > 1 {
					// Flat gather: the second arrival gathers all others.
					if tr.Root() != 1 || len(tr.Children(1)) != n-1 {
						t.Fatalf("flat: root %d with %d children", tr.Root(), len(tr.Children(tr.Root())))
					}
				}
			})
		}
	}
}

// TestFigure25a reconstructs the thesis' Figure 2.5a: six objects R1..R6,
// binary tree. R1,R2,R3 form the first complete subtree with R2 at its
// root; R4 is the root; R6 waits on R5 as its first child and on a second
// child that never comes:
//
//	      R4
//	    /    \
//	  R2      R6
//	 /  \    /
//	R1  R3  R5
func TestFigure25a(t *testing.T) {
	tr, err := NewTree(6, 2)
	if err != nil {
		t.Fatal(err)
	}
	wantParent := []int{1, 3, 1, -1, 5, 3}
	for p, want := range wantParent {
		if got := tr.Parent(p); got != want {
			t.Errorf("Parent(R%d) = position %d, want %d", p+1, got, want)
		}
	}
	if tr.Root() != 3 || tr.Height() != 2 {
		t.Errorf("root %d height %d, want 3 and 2", tr.Root(), tr.Height())
	}
	if !slices.Equal(tr.Children(3), []int{1, 5}) || !slices.Equal(tr.Children(5), []int{4}) {
		t.Errorf("Children(3) = %v, Children(5) = %v", tr.Children(3), tr.Children(5))
	}
}

func TestNewTreeLargeDegreeEqualsFlat(t *testing.T) {
	for n := 1; n <= 20; n++ {
		flat, _ := NewTree(n, max(n-1, 1))
		for _, d := range []int{n, n + 1, 1000, int(^uint(0) >> 1)} {
			tr, err := NewTree(n, d)
			if err != nil {
				t.Fatal(err)
			}
			for p := 0; p < n; p++ {
				if tr.Parent(p) != flat.Parent(p) {
					t.Fatalf("n=%d d=%d: Parent(%d) = %d, flat has %d", n, d, p, tr.Parent(p), flat.Parent(p))
				}
			}
		}
	}
}

func TestNewTreeLarge(t *testing.T) {
	const n = 200000
	for _, d := range []int{1, 2, 7} {
		tr, err := NewTree(n, d)
		if err != nil {
			t.Fatal(err)
		}
		want := n - 1
		if d > 1 {
			want = minHeight(n, d)
		}
		if tr.Height() != want {
			t.Fatalf("d=%d: Height() = %d, want %d", d, tr.Height(), want)
		}
		if lo, hi := tr.Span(tr.Root()); lo != 0 || hi != n-1 {
			t.Fatalf("d=%d: root spans [%d,%d]", d, lo, hi)
		}
	}
}

func TestInvalidShapes(t *testing.T) {
	for _, c := range [][2]int{{0, 2}, {-1, 2}, {3, 0}, {3, -5}} {
		if _, err := NewTree(c[0], c[1]); !errors.Is(err, ErrInvalidShape) {
			t.Errorf("NewTree(%d,%d) error = %v", c[0], c[1], err)
		}
		if _, err := NewChainLeafTree(c[0], c[1]); !errors.Is(err, ErrInvalidShape) {
			t.Errorf("NewChainLeafTree(%d,%d) error = %v", c[0], c[1], err)
		}
	}
}

func TestChildrenIsACopy(t *testing.T) {
	tr, _ := NewTree(7, 2)
	cs := tr.Children(3)
	cs[0] = 99
	if tr.Children(3)[0] != 1 {
		t.Fatal("mutating Children's result changed the tree")
	}
}

// chainLeafDepth is the uncapped height D of the binary top of a
// chain-leaf tree: the smallest D with 2^D·(k+1) >= n+1.
func chainLeafDepth(n, k int) int {
	d := 0
	for (1<<d)*(k+1) < n+1 {
		d++
	}
	return d
}

func TestChainLeafTreeExhaustive(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for k := 1; k <= n+1; k++ {
			tr, err := NewChainLeafTree(n, k)
			if err != nil {
				t.Fatal(err)
			}
			checkValid(t, tr, n, 2)
			checkPrefixes(t, tr)
			// Binary top of about log2((n+1)/(k+1)) levels plus chains of
			// at most k nodes.
			if bound := chainLeafDepth(n, k) + k - 1; tr.Height() > bound {
				t.Fatalf("n=%d k=%d: Height() = %d > %d", n, k, tr.Height(), bound)
			}
			if k >= n && (tr.Height() != n-1 || tr.Root() != n-1) {
				t.Fatalf("n=%d k=%d: want a plain chain, height %d root %d", n, k, tr.Height(), tr.Root())
			}
		}
	}
}

// When n fills the shape exactly, every chain has k nodes, so all leaves
// sit at the same depth D-1+k.
func TestChainLeafTreeExactFill(t *testing.T) {
	for depth := 1; depth <= 4; depth++ {
		for k := 1; k <= 5; k++ {
			n := (1<<depth - 1) + (1<<depth)*k
			tr, err := NewChainLeafTree(n, k)
			if err != nil {
				t.Fatal(err)
			}
			leaves := 0
			for p := 0; p < n; p++ {
				if len(tr.Children(p)) == 0 {
					leaves++
					if tr.Depth(p) != depth-1+k {
						t.Fatalf("n=%d k=%d: leaf %d at depth %d, want %d", n, k, p, tr.Depth(p), depth-1+k)
					}
				}
			}
			if leaves != 1<<depth {
				t.Fatalf("n=%d k=%d: %d leaves, want %d chains", n, k, leaves, 1<<depth)
			}
		}
	}
}

// With chains of one node and n = 2^m-1 the published shape is the perfect
// binary tree, the same as NewTree(n, 2).
func TestChainLeafTreeMatchesBinary(t *testing.T) {
	for m := 1; m <= 7; m++ {
		n := 1<<m - 1
		a, _ := NewChainLeafTree(n, 1)
		b, _ := NewTree(n, 2)
		for p := 0; p < n; p++ {
			if a.Parent(p) != b.Parent(p) {
				t.Fatalf("n=%d: Parent(%d) = %d vs %d", n, p, a.Parent(p), b.Parent(p))
			}
		}
	}
}
