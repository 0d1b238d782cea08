// Package revoke spreads failure knowledge to every live member: the ULFM
// "logarithmic revoke", a non-uniform reliable broadcast over a binomial
// graph (BMG) overlay.
//
// The package is the pure core (no goroutines, no clocks,
// no I/O): Overlay computes who talks to whom, Broadcaster is one member's
// broadcast state, stepped by events (Originate, Received, Reoverlay:
// Broadcaster.Step) that return decisions (whom to send to, whether to deliver locally). The
// supervised actor that owns a Broadcaster, sends its decisions and
// delivers notices is a thin shell around it, in internal/actors/revokeactor.
package revoke

import (
	"errors"
	"fmt"
	"slices"
)

// Overlay is the binomial graph over the current topology, seen from one
// member (self).
//
// Members are ranked 0..n-1 in sorted order of their ids. Sorting is what
// lets every member compute the same ranks — and so the same graph —
// from the same member list without exchanging a message: the list the
// membership layer hands out may arrive in any order, but its sorted order
// is a pure function of its contents.
//
// Member r links to r+2^k and r-2^k (mod n) for every k with 2^k < n. The
// offset set {±2^k} is closed under negation, so the graph is undirected
// (a is b's neighbour iff b is a's) and regular. Offsets that coincide mod
// n are counted once: +2^i ≡ -2^j exactly when 2^i+2^j = n. Hence, with
// K = ⌈log2 n⌉ (the number of k with 2^k < n), the degree is
//
//	n = 1                         0
//	n = 2^m (m ≥ 1)               2K-1   (+n/2 ≡ -n/2)
//	n = 2^a + 2^b (a > b)         2K-2   (+2^a ≡ -2^b, +2^b ≡ -2^a)
//	otherwise                     2K
//
// so K ≤ degree ≤ 2K. The BMG's node connectivity equals its degree D
// (Angskun, Bosilca, Dongarra 2007): removing any D-1 members leaves the
// rest connected, which is what makes flooding over it reliable.
//
// An Overlay is immutable; WithMembers returns the overlay of a new
// topology.
type Overlay struct {
	members []string       // sorted; rank = index
	rank    map[string]int // id -> rank
	self    int            // rank of self
	offsets []int          // distinct offsets in (0, n): +1, -1, +2, -2, ...
	nbrs    []string       // self's neighbours, in offset order
}

// Errors returned by NewOverlay and WithMembers.
var (
	ErrNoMembers       = errors.New("revoke: empty member list")
	ErrSelfNotMember   = errors.New("revoke: self is not a member")
	ErrDuplicateMember = errors.New("revoke: duplicate member id")
)

// NewOverlay builds the BMG over members (the current topology, in any
// order) as seen from self. It fails on an empty list, duplicate ids, or
// a self that is not a member. The members slice is not retained.
func NewOverlay(members []string, self string) (*Overlay, error) {
	n := len(members)
	if n == 0 {
		return nil, ErrNoMembers
	}
	sorted := slices.Clone(members)
	slices.Sort(sorted)
	rank := make(map[string]int, n)
	for i, id := range sorted {
		if i > 0 && sorted[i-1] == id {
			return nil, fmt.Errorf("%w: %q", ErrDuplicateMember, id)
		}
		rank[id] = i
	}
	r, ok := rank[self]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrSelfNotMember, self)
	}
	o := &Overlay{members: sorted, rank: rank, self: r, offsets: bmgOffsets(n)}
	o.nbrs = o.neighborsOfRank(r)
	return o, nil
}

// bmgOffsets returns the distinct values of ±2^k mod n for 2^k < n, nearest
// first (+1, -1, +2, -2, ...). 0 never occurs since 0 < 2^k < n.
func bmgOffsets(n int) []int {
	var offs []int
	seen := make(map[int]bool)
	for p := 1; p < n; p *= 2 {
		for _, off := range [2]int{p, n - p} {
			if !seen[off] {
				seen[off] = true
				offs = append(offs, off)
			}
		}
	}
	return offs
}

func (o *Overlay) neighborsOfRank(r int) []string {
	n := len(o.members)
	out := make([]string, 0, len(o.offsets))
	for _, off := range o.offsets {
		out = append(out, o.members[(r+off)%n])
	}
	return out
}

// WithMembers returns the overlay for a new topology (members joined or
// left) with the same self. Ranks, and therefore neighbour sets, are
// recomputed from scratch.
//
// Notices in flight while members switch topologies are still delivered:
// a member forwards a notice using its own current neighbour set at the
// moment it first receives it, and duplicates are suppressed by the notice
// id whichever overlay the copy travelled on. That alone is not quite
// enough: a member that joins mid-wave is linked only in the new overlay,
// and if its new neighbours all forwarded on the old one it is missed
// (TestJoinerNeedsReplay). So a Reoverlay step also re-sends recent
// notices to the neighbours the new overlay adds; once every live member
// is on the new overlay, each one holding a notice has covered all its new
// neighbours, and the new BMG's connectivity does the rest.
func (o *Overlay) WithMembers(members []string) (*Overlay, error) {
	return NewOverlay(members, o.Self())
}

// Self returns the id of the member this overlay is seen from.
func (o *Overlay) Self() string { return o.members[o.self] }

// Size returns the number of members n.
func (o *Overlay) Size() int { return len(o.members) }

// Degree returns the number of distinct neighbours of every member (the
// graph is regular); see the Overlay doc for the formula.
func (o *Overlay) Degree() int { return len(o.offsets) }

// Members returns the members in rank order.
func (o *Overlay) Members() []string { return slices.Clone(o.members) }

// Rank returns id's rank, or -1 if id is not a member.
func (o *Overlay) Rank(id string) int {
	if r, ok := o.rank[id]; ok {
		return r
	}
	return -1
}

// Contains reports whether id is a member.
func (o *Overlay) Contains(id string) bool {
	_, ok := o.rank[id]
	return ok
}

// Neighbors returns self's neighbours (deduplicated, never self), nearest
// offset first. The slice is a copy.
func (o *Overlay) Neighbors() []string { return slices.Clone(o.nbrs) }

// NeighborsOf returns id's neighbours, or nil if id is not a member.
func (o *Overlay) NeighborsOf(id string) []string {
	r, ok := o.rank[id]
	if !ok {
		return nil
	}
	return o.neighborsOfRank(r)
}
