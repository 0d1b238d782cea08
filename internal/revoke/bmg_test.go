package revoke

import (
	"errors"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// wantDegree is the BMG degree derived in the Overlay doc: 2K offsets ±2^k
// (K = ⌈log2 n⌉), minus the coincidences +2^i ≡ -2^j (2^i + 2^j = n).
func wantDegree(n int) int {
	if n <= 1 {
		return 0
	}
	k := bits.Len(uint(n - 1)) // ⌈log2 n⌉ = #{k : 2^k < n}
	switch bits.OnesCount(uint(n)) {
	case 1:
		return 2*k - 1
	case 2:
		return 2*k - 2
	default:
		return 2 * k
	}
}

func TestDegreeAndSymmetry(t *testing.T) {
	for n := 1; n <= 1024; n++ {
		members := names(n, "m")
		// Hand the list over in reverse: ranks must not depend on order.
		rev := slices.Clone(members)
		slices.Reverse(rev)
		o, err := NewOverlay(rev, members[0])
		if err != nil {
			t.Fatal(err)
		}
		d := o.Degree()
		k := bits.Len(uint(n - 1))
		if d != wantDegree(n) {
			t.Fatalf("n=%d: degree %d, want %d", n, d, wantDegree(n))
		}
		if d < k || d > 2*k {
			t.Fatalf("n=%d: degree %d outside [⌈log2 n⌉=%d, %d]", n, d, k, 2*k)
		}
		if o.Size() != n || len(o.Neighbors()) != d {
			t.Fatalf("n=%d: size %d, |Neighbors()| %d, degree %d", n, o.Size(), len(o.Neighbors()), d)
		}
		// Every member: exactly the brute-force set {r±2^k mod n} \ {r},
		// no duplicates, same degree (regular), symmetric.
		adj := make([]map[int]bool, n)
		for r, id := range members {
			if o.Rank(id) != r {
				t.Fatalf("n=%d: Rank(%q)=%d, want %d", n, id, o.Rank(id), r)
			}
			want := map[int]bool{}
			for p := 1; p < n; p *= 2 {
				want[(r+p)%n] = true
				want[((r-p)%n+n)%n] = true
			}
			delete(want, r)
			nb := o.NeighborsOf(id)
			adj[r] = map[int]bool{}
			for _, x := range nb {
				xr := o.Rank(x)
				if xr == r || adj[r][xr] || !want[xr] {
					t.Fatalf("n=%d: NeighborsOf(%q) = %v: bad neighbour %q", n, id, nb, x)
				}
				adj[r][xr] = true
			}
			if len(nb) != len(want) || len(nb) != d {
				t.Fatalf("n=%d: |NeighborsOf(%q)| = %d, brute force %d, degree %d", n, id, len(nb), len(want), d)
			}
		}
		for a := range n {
			for b := range adj[a] {
				if !adj[b][a] {
					t.Fatalf("n=%d: %d→%d but not %d→%d", n, a, b, b, a)
				}
			}
		}
	}
}

func TestOverlayErrors(t *testing.T) {
	if _, err := NewOverlay(nil, "a"); !errors.Is(err, ErrNoMembers) {
		t.Fatalf("empty: %v", err)
	}
	if _, err := NewOverlay([]string{"a", "b"}, "c"); !errors.Is(err, ErrSelfNotMember) {
		t.Fatalf("self missing: %v", err)
	}
	if _, err := NewOverlay([]string{"a", "b", "a"}, "a"); !errors.Is(err, ErrDuplicateMember) {
		t.Fatalf("duplicate: %v", err)
	}
	o, err := NewOverlay([]string{"solo"}, "solo")
	if err != nil {
		t.Fatal(err)
	}
	if o.Degree() != 0 || len(o.Neighbors()) != 0 || o.Size() != 1 || o.Rank("solo") != 0 {
		t.Fatalf("n=1: degree %d neighbours %v", o.Degree(), o.Neighbors())
	}
	if o.Rank("x") != -1 || o.NeighborsOf("x") != nil || o.Contains("x") {
		t.Fatal("non-member has a rank or neighbours")
	}
	if _, err := o.WithMembers([]string{"a", "b"}); !errors.Is(err, ErrSelfNotMember) {
		t.Fatalf("WithMembers without self: %v", err)
	}
}

func TestOverlayRanksAreSortedOrderAndCopied(t *testing.T) {
	in := []string{"c", "a", "d", "b"}
	o, err := NewOverlay(in, "a")
	if err != nil {
		t.Fatal(err)
	}
	in[0] = "zzz" // the caller's slice is not retained
	if got := o.Members(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Fatalf("members %v", got)
	}
	// n=4: offsets +1, -1, +2 (+2 ≡ -2).
	if got := o.Neighbors(); !slices.Equal(got, []string{"b", "d", "c"}) {
		t.Fatalf("neighbours %v", got)
	}
	nb := o.Neighbors()
	nb[0] = "mutated"
	if o.Neighbors()[0] != "b" {
		t.Fatal("Neighbors() exposes internal state")
	}
	o2, err := o.WithMembers([]string{"e", "b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if o2.Self() != "a" || o2.Size() != 3 || !slices.Equal(o2.Neighbors(), []string{"b", "e"}) {
		t.Fatalf("WithMembers: self %q size %d neighbours %v", o2.Self(), o2.Size(), o2.Neighbors())
	}
	if o.Size() != 4 {
		t.Fatal("WithMembers changed the old overlay")
	}
}

// FuzzOverlay: any member list (comma separated, possibly empty ids,
// duplicates, non-UTF-8) must never panic; valid ones must satisfy the
// overlay invariants and flood to everyone.
func FuzzOverlay(f *testing.F) {
	f.Add("a,b,c", uint8(0))
	f.Add("", uint8(3))
	f.Add("x", uint8(0))
	f.Add("a,a", uint8(1))
	f.Add(",,", uint8(0))
	f.Add("n1,n2,n3,n4,n5,n6,n7,n8,n9,n10,n11,n12,n13", uint8(200))
	f.Add("\xff,\x00,é", uint8(2))
	f.Fuzz(func(t *testing.T, list string, pick uint8) {
		var members []string
		if list != "" {
			members = strings.Split(list, ",")
		}
		self := "not-a-member"
		if len(members) > 0 && pick%8 != 7 {
			self = members[int(pick)%len(members)]
		}
		o, err := NewOverlay(members, self)
		if err != nil {
			return
		}
		n := o.Size()
		if n != len(members) || o.Degree() != wantDegree(n) || o.Self() != self {
			t.Fatalf("size %d degree %d self %q", n, o.Degree(), o.Self())
		}
		if n > 128 {
			return
		}
		for _, m := range o.Members() {
			nb := o.NeighborsOf(m)
			if len(nb) != o.Degree() || slices.Contains(nb, m) {
				t.Fatalf("NeighborsOf(%q) = %v", m, nb)
			}
			for _, x := range nb {
				if !slices.Contains(o.NeighborsOf(x), m) {
					t.Fatalf("asymmetric %q %q", m, x)
				}
			}
		}
		// No failures: the notice reaches everybody exactly once.
		s := newSim(t, overlaysFor(t, members), nil)
		nt := Notice{Origin: self, Subject: "x", Epoch: uint64(pick)}
		s.originate(self, nt)
		s.run()
		s.checkAllDelivered(members, nt.ID(), "fuzz")
		// Arbitrary input from the network must not panic either.
		b := NewBroadcaster(o, WithWindow(int(pick%4)))
		for i, m := range members {
			b.receive(m, Notice{Origin: m, Subject: list, Epoch: uint64(i % 3)})
		}
		b.setOverlay(nil)
		b.setOverlay(o)
	})
}
