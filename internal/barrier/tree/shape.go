package tree

import (
	"github.com/hoplite-go/hoplite/messages"
)

// DefaultFanout is the fan-out barriers' trees take: at 1,024 members
// the simulator finds 4 the fastest of 2 to 16 (sim.TestBarrierFanouts).
const DefaultFanout = 4

// MaxFanout bounds a Shape's fan-out: a position sends its children one
// message each, and a wide fan-out is a flat barrier again.
const MaxFanout = 64

// Shape is a complete k-ary tree over an ordered member list: position
// 0 (the first member) is the root, position i's parent is (i-1)/k and
// its children are k·i+1 … k·i+k. Its depth is ⌈log_k((k-1)·n+1)⌉-1,
// at most ⌈log2 n⌉. A Shape is immutable.
type Shape struct {
	members []string
	pos     map[string]int
	fanout  int
}

// NewShape returns the tree of fan-out k over members, root first.
// Members must be distinct and non-empty.
func NewShape(members []string, k int) (*Shape, error) {
	if len(members) == 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree: no members")
	}
	if k < 2 || k > MaxFanout {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree: fan-out %d: want 2..%d", k, MaxFanout)
	}
	s := &Shape{members: append([]string(nil), members...), pos: make(map[string]int, len(members)), fanout: k}
	for i, m := range members {
		if m == "" {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree: member %d has no name", i)
		}
		if _, dup := s.pos[m]; dup {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree: member %q twice", m)
		}
		s.pos[m] = i
	}
	return s, nil
}

// RootFirst orders members for NewShape: root first, then the others
// in the order given (root is added if it is not among them).
func RootFirst(root string, members []string) []string {
	out := make([]string, 0, len(members)+1)
	out = append(out, root)
	for _, m := range members {
		if m != root {
			out = append(out, m)
		}
	}
	return out
}

// Len is the number of positions.
func (s *Shape) Len() int { return len(s.members) }

// Fanout is k.
func (s *Shape) Fanout() int { return s.fanout }

// Member is the member at position i.
func (s *Shape) Member(i int) string { return s.members[i] }

// Position is member's position, false if it is not in the tree.
func (s *Shape) Position(member string) (int, bool) {
	i, ok := s.pos[member]
	return i, ok
}

// valid reports whether i is a position.
func (s *Shape) valid(i int) bool { return i >= 0 && i < len(s.members) }

// Parent is i's parent, -1 for the root.
func (s *Shape) Parent(i int) int {
	if i <= 0 {
		return -1
	}
	return (i - 1) / s.fanout
}

// Children are i's children, in order.
func (s *Shape) Children(i int) []int {
	var out []int
	for c := s.fanout*i + 1; c <= s.fanout*i+s.fanout && c < len(s.members); c++ {
		out = append(out, c)
	}
	return out
}

// Level is i's distance from the root.
func (s *Shape) Level(i int) int {
	l := 0
	for i > 0 {
		i = s.Parent(i)
		l++
	}
	return l
}

// Depth is the greatest Level: the hops an arrival takes from the
// farthest position to the root, and an outcome back.
func (s *Shape) Depth() int { return s.Level(len(s.members) - 1) }

// Toward is the child of i on the path to leaf: -1 when leaf is i
// itself, -2 when leaf is not in i's subtree (or not a position).
func (s *Shape) Toward(i, leaf int) int {
	if !s.valid(i) || !s.valid(leaf) {
		return -2
	}
	if leaf == i {
		return -1
	}
	for leaf > i {
		p := s.Parent(leaf)
		if p == i {
			return leaf
		}
		leaf = p
	}
	return -2
}

// Subtree lists i and every position under it, in breadth-first order.
func (s *Shape) Subtree(i int) []int {
	if !s.valid(i) {
		return nil
	}
	out := []int{i}
	for q := 0; q < len(out); q++ {
		out = append(out, s.Children(out[q])...)
	}
	return out
}
