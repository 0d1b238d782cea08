// Package plan is the pure reduce-tree planner of Hoplite: it decides the
// shape of a reduce tree, where each arriving object goes in it, what a
// failure invalidates, and which tree degree the cost model prefers.
//
// It holds no goroutines, clocks, I/O or actors on purpose: the reduce
// coordinator feeds it events (an object became ready, a holder failed)
// and acts on its answers, so every scheduling decision can be tested
// exhaustively and replayed deterministically, apart from the messaging
// that carries it out.
//
// Positions in a tree are numbered in generalized in-order (first child
// subtree, the node, then child subtrees 2..d), and the k-th object to
// arrive takes position k. In-order numbering makes every subtree a
// contiguous range of positions, so any prefix of arrivals fills whole
// subtrees that can start reducing before the later objects exist.
package plan

import (
	"errors"
	"fmt"
)

// ErrInvalidShape reports tree parameters no tree can be built from, so
// callers can tell a planning bug from a runtime failure.
var ErrInvalidShape = errors.New("plan: invalid tree shape")

// Tree is an immutable reduce tree over positions 0..N()-1. Both shapes
// (NewTree and NewChainLeafTree) return the same type so that the
// coordinator and benchmarks can switch shapes without other changes.
//
// Methods taking a position panic when it is outside [0, N()), like slice
// indexing: positions come from the planner itself, never from the network.
type Tree struct {
	n        int
	degree   int
	root     int
	parent   []int
	children [][]int
	depth    []int
	lo, hi   []int
	height   int
}

// NewTree builds the reduce tree for n objects with at most d children per
// node; d == 1 yields a chain and d >= n-1 a flat gather.
//
// Shape rule: take the infinite perfect d-ary tree numbered in generalized
// in-order, keep positions 0..n-1 and splice out every missing node. A
// missing node can only have its first child subtree (partly) present,
// because all its later children come after it in in-order, so splicing
// it out never gives a node more than d children. The result depends on n
// and d only, its first (d^(h+1)-1)/(d-1) positions always form a perfect
// subtree of height h (arrivals complete whole subtrees as early as any
// in-order placement can), and its height is the minimum possible for n
// nodes of degree d, about log_d n. The root is the topmost surviving
// node; its holder ends up with the full reduction.
//
// For d == 1 each position takes the previous one as its only child, so
// the chain grows upward and the root is position n-1: the object that
// arrives last is the only one that cannot start before everyone else,
// and placing it at the end keeps every earlier prefix already reduced.
func NewTree(n, d int) (*Tree, error) {
	if n < 1 || d < 1 {
		return nil, fmt.Errorf("%w: n=%d d=%d (need n>=1, d>=1)", ErrInvalidShape, n, d)
	}
	t := newEmpty(n, d)
	// A degree beyond n-1 cannot be used by n nodes; capping it keeps the
	// perfect-tree sizes below overflow without changing the shape.
	eff := min(d, n)
	if eff == 1 {
		for p := 0; p < n-1; p++ {
			t.link(p+1, p)
		}
	} else {
		b := builder{t: t, d: eff, sizes: perfectSizes(n, eff)}
		b.build(0, len(b.sizes)-1)
	}
	t.finish()
	return t, nil
}

// perfectSizes returns the sizes of perfect d-ary trees of height
// 0, 1, ... up to the first that holds n nodes, saturating instead of
// overflowing.
func perfectSizes(n, d int) []int {
	sizes := []int{1}
	for sizes[len(sizes)-1] < n {
		sizes = append(sizes, satAdd(satMul(sizes[len(sizes)-1], d), 1))
	}
	return sizes
}

type builder struct {
	t     *Tree
	d     int
	sizes []int
}

// build places the perfect subtree of height h whose in-order numbering
// starts at lo, and returns its root position, or -1 when none of its
// positions is below n.
func (b *builder) build(lo, h int) int {
	n := b.t.n
	if lo >= n {
		return -1
	}
	if h == 0 {
		return lo
	}
	cs := b.sizes[h-1]
	node := lo + cs
	if node >= n {
		// Missing node: only its first child subtree is (partly) present,
		// and it takes the missing node's place.
		return b.build(lo, h-1)
	}
	b.t.link(node, b.build(lo, h-1))
	for j := 0; j < b.d-1; j++ {
		c := b.build(node+1+j*cs, h-1)
		if c < 0 {
			break
		}
		b.t.link(node, c)
	}
	return node
}

// NewChainLeafTree builds the shape the published Hoplite code used: a
// perfect binary tree whose leaves hang chains of at most chainLen nodes
// (see ChainLength). Chains pipeline large objects at one transfer cost
// while the binary top keeps the latency term logarithmic; it is kept
// beside NewTree so both can be judged by measurement.
//
// The binary part has the smallest height D with 2^D·(chainLen+1) >= n+1,
// capped so that it never needs more than n nodes; the n-(2^D-1) remaining
// positions are split over the 2^D chains as evenly as possible, earlier
// chains taking the extra node. chainLen >= n gives a plain chain.
// Positions follow in-order as in NewTree, a chain counting as a first
// child below its upper neighbour, so arrivals fill chains bottom-up.
// Degree reports 2, or 1 when the result is a plain chain.
func NewChainLeafTree(n, chainLen int) (*Tree, error) {
	if n < 1 || chainLen < 1 {
		return nil, fmt.Errorf("%w: n=%d chainLen=%d (need n>=1, chainLen>=1)", ErrInvalidShape, n, chainLen)
	}
	k := min(chainLen, n)
	depth := 0
	for satMul(1<<depth, k+1) < n+1 {
		depth++
	}
	maxDepth := 0
	for (2<<maxDepth)-1 <= n {
		maxDepth++
	}
	depth = min(depth, maxDepth)

	t := newEmpty(n, 2)
	if depth == 0 {
		t.degree = 1
		for p := 0; p < n-1; p++ {
			t.link(p+1, p)
		}
		t.finish()
		return t, nil
	}
	chains := 1 << depth
	rest := n - (chains - 1)
	c := chainBuilder{t: t, base: rest / chains, extra: rest % chains}
	c.build(depth - 1)
	t.finish()
	return t, nil
}

type chainBuilder struct {
	t           *Tree
	next        int // next position in in-order
	chain       int // index of the next chain slot
	base, extra int
}

// build numbers a perfect binary subtree of height h with chains under
// its bottom level and returns its root; h < 0 stands for one chain slot.
func (c *chainBuilder) build(h int) int {
	if h < 0 {
		length := c.base
		if c.chain < c.extra {
			length++
		}
		c.chain++
		if length == 0 {
			return -1
		}
		for p := c.next; p < c.next+length-1; p++ {
			c.t.link(p+1, p)
		}
		c.next += length
		return c.next - 1
	}
	left := c.build(h - 1)
	node := c.next
	c.next++
	right := c.build(h - 1)
	if left >= 0 {
		c.t.link(node, left)
	}
	if right >= 0 {
		c.t.link(node, right)
	}
	return node
}

func newEmpty(n, d int) *Tree {
	t := &Tree{n: n, degree: d, parent: make([]int, n), children: make([][]int, n)}
	for p := range t.parent {
		t.parent[p] = -1
	}
	return t
}

func (t *Tree) link(parent, child int) {
	t.parent[child] = parent
	t.children[parent] = append(t.children[parent], child)
}

// finish derives the root, depths and subtree spans once, so that queries
// stay O(1) and the tree can be shared read-only by every caller.
func (t *Tree) finish() {
	t.root = -1
	for p, par := range t.parent {
		if par < 0 {
			t.root = p
			break
		}
	}
	t.depth = make([]int, t.n)
	t.lo = make([]int, t.n)
	t.hi = make([]int, t.n)
	order := make([]int, 0, t.n)
	order = append(order, t.root)
	for i := 0; i < len(order); i++ {
		p := order[i]
		for _, c := range t.children[p] {
			t.depth[c] = t.depth[p] + 1
			order = append(order, c)
		}
		t.height = max(t.height, t.depth[p])
	}
	for i := len(order) - 1; i >= 0; i-- {
		p := order[i]
		t.lo[p], t.hi[p] = p, p
		if cs := t.children[p]; len(cs) > 0 {
			t.lo[p] = min(p, t.lo[cs[0]])
			t.hi[p] = max(p, t.hi[cs[len(cs)-1]])
		}
	}
}

// N is the number of positions, i.e. objects the reduce waits for.
func (t *Tree) N() int { return t.n }

// Degree is the most children any node may have; callers size their
// per-node fan-in buffers by it.
func (t *Tree) Degree() int { return t.degree }

// Root is the position whose holder ends up with the complete reduction
// and streams it to the reduce target.
func (t *Tree) Root() int { return t.root }

// Parent is the position pos streams its partial result to, or -1 for
// the root.
func (t *Tree) Parent(pos int) int { return t.parent[pos] }

// Children lists the positions streaming into pos, in in-order. The slice
// is a copy so the shared tree cannot be altered through it.
func (t *Tree) Children(pos int) []int {
	return append([]int(nil), t.children[pos]...)
}

// Depth counts the edges from pos up to the root; it bounds how many hops
// pos's data travels before it reaches the result.
func (t *Tree) Depth(pos int) int { return t.depth[pos] }

// Height is the largest depth, the latency term of the cost model.
func (t *Tree) Height() int { return t.height }

// Ancestors lists pos's parent, grandparent, ... up to the root: exactly
// the nodes whose partial results include pos's object and must be
// cleared when its holder fails.
func (t *Tree) Ancestors(pos int) []int {
	out := make([]int, 0, t.depth[pos])
	for p := t.parent[pos]; p >= 0; p = t.parent[p] {
		out = append(out, p)
	}
	return out
}

// Span returns the first and last position of the subtree rooted at pos.
// In-order numbering makes every subtree the contiguous range [lo, hi],
// so the subtree is complete exactly once positions lo..hi are filled.
func (t *Tree) Span(pos int) (lo, hi int) { return t.lo[pos], t.hi[pos] }

func satMul(a, b int) int {
	const maxInt = int(^uint(0) >> 1)
	if a != 0 && b > maxInt/a {
		return maxInt
	}
	return a * b
}

func satAdd(a, b int) int {
	const maxInt = int(^uint(0) >> 1)
	if a > maxInt-b {
		return maxInt
	}
	return a + b
}
