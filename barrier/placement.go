package barrier

import (
	"cmp"
	"slices"

	"github.com/hoplite-go/hoplite/internal/rendezvous"
)

// Placement orders hosts by rendezvous (highest random weight) hashing of
// name: the first max-replicas of them host a new barrier's managers, and
// Open asks them in this order. Every member computes the same order from
// the same live set, and a member joining or leaving moves only the
// barriers it would rank first, not all of them (as an index modulo the
// member count did). hosts is not modified.
func Placement(name string, hosts []MemberHost) []MemberHost {
	type ranked struct {
		h MemberHost
		w uint64
	}
	key := rendezvous.Key(name)
	rs := make([]ranked, len(hosts))
	for i, h := range hosts {
		rs[i] = ranked{h, rendezvous.Weight(rendezvous.Seed(h.Member), key)}
	}
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.w, a.w); c != 0 {
			return c
		}
		return cmp.Compare(a.h.Member, b.h.Member)
	})
	out := make([]MemberHost, len(rs))
	for i, r := range rs {
		out[i] = r.h
	}
	return out
}
