package revoke

import (
	"cmp"
	"hash/fnv"
	"slices"
	"time"
)

// Roster is one member's knowledge of who is in the cluster, for a
// provider whose members watch only some of the others: each member
// checks its binomial-graph neighbours (MonitorTargets) and learns the
// rest from them, so that its monitoring costs O(log n) checks per
// interval rather than n.
//
// Knowledge spreads as state, not as events: two members compare
// Digests (a hash of the live ids) and the one that differs pulls the
// other's Entries and Dead ids and Merges them. A member id names one
// incarnation (a restart takes a new id), so a dead id never comes back:
// dead beats live in every merge, and merges commute. What is dead is
// remembered for a TTL, longer than the knowledge takes to spread, and
// at most maxDead ids of it, oldest forgotten first.
//
// Info is what a member publishes about another (its addresses): the
// roster keeps it as the member's own word or the first gossip of it.
type Roster[T any] struct {
	self     string
	maxLive  int
	maxDead  int
	deadTTL  time.Duration
	live     map[string]*RosterEntry[T]
	dead     map[string]time.Time // id -> when it was learned dead
	digest   uint64
	digested bool
}

// RosterEntry is one live member: its id, the endpoint its monitors check
// (Host), and its Info.
type RosterEntry[T any] struct {
	ID   string
	Host string
	Info T
}

// NewRoster returns the roster of member self: it never lists self (the
// caller adds itself), holds at most maxLive live members (the rest are
// refused until some die: a bound on what a peer's gossip can make it
// hold) and remembers dead ids for deadTTL, at most maxDead of them.
func NewRoster[T any](self string, maxLive, maxDead int, deadTTL time.Duration) *Roster[T] {
	return &Roster[T]{self: self, maxLive: max(maxLive, 1), maxDead: max(maxDead, 1), deadTTL: deadTTL,
		live: map[string]*RosterEntry[T]{}, dead: map[string]time.Time{}}
}

// Observe records that host answered a check as member id: id is live
// unless it is known dead, and any other member listed at host is dead
// (one endpoint serves one incarnation at a time: the former one is
// gone). It reports whether the live set changed.
func (r *Roster[T]) Observe(now time.Time, host, id string, info T) bool {
	changed := false
	for oid, e := range r.live {
		if e.Host == host && oid != id {
			changed = r.Kill(now, oid) || changed
		}
	}
	return r.add(host, id, info) || changed
}

// add lists id as live (not self, not dead, within maxLive).
func (r *Roster[T]) add(host, id string, info T) bool {
	if id == "" || id == r.self {
		return false
	}
	if _, dead := r.dead[id]; dead {
		return false
	}
	if e := r.live[id]; e != nil {
		if e.Host == "" {
			e.Host = host
		}
		return false
	}
	if len(r.live) >= r.maxLive {
		return false
	}
	r.live[id] = &RosterEntry[T]{ID: id, Host: host, Info: info}
	r.digested = false
	return true
}

// Kill records that member id is dead. It reports whether id was live.
func (r *Roster[T]) Kill(now time.Time, id string) bool {
	if id == "" || id == r.self {
		return false
	}
	if _, ok := r.dead[id]; !ok {
		if len(r.dead) >= r.maxDead {
			r.forgetOldestDead()
		}
		r.dead[id] = now
	}
	if _, ok := r.live[id]; ok {
		delete(r.live, id)
		r.digested = false
		return true
	}
	return false
}

func (r *Roster[T]) forgetOldestDead() {
	oldest, at := "", time.Time{}
	for id, t := range r.dead {
		if oldest == "" || t.Before(at) || t.Equal(at) && id < oldest {
			oldest, at = id, t
		}
	}
	delete(r.dead, oldest)
}

// Merge takes a peer's roster: its dead ids, then its live entries. It
// reports whether the live set changed.
func (r *Roster[T]) Merge(now time.Time, live []RosterEntry[T], dead []string) bool {
	changed := false
	for _, id := range dead {
		changed = r.Kill(now, id) || changed
	}
	for _, e := range live {
		changed = r.add(e.Host, e.ID, e.Info) || changed
	}
	return changed
}

// Expire forgets the dead ids older than the TTL.
func (r *Roster[T]) Expire(now time.Time) {
	for id, t := range r.dead {
		if now.Sub(t) >= r.deadTTL {
			delete(r.dead, id)
		}
	}
}

// Live lists the live members, sorted by id (copies).
func (r *Roster[T]) Live() []RosterEntry[T] {
	out := make([]RosterEntry[T], 0, len(r.live))
	for _, e := range r.live {
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b RosterEntry[T]) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Lookup is member id's entry, if it is live.
func (r *Roster[T]) Lookup(id string) (RosterEntry[T], bool) {
	if e := r.live[id]; e != nil {
		return *e, true
	}
	return RosterEntry[T]{}, false
}

// Dead lists the ids remembered dead, sorted.
func (r *Roster[T]) Dead() []string {
	out := make([]string, 0, len(r.dead))
	for id := range r.dead {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// IsDead reports whether id is remembered dead.
func (r *Roster[T]) IsDead(id string) bool {
	_, ok := r.dead[id]
	return ok
}

// Digest hashes the live ids with self: two members whose digests are
// equal list the same cluster (each lists itself, the other's roster
// lists it).
func (r *Roster[T]) Digest() uint64 {
	if !r.digested {
		ids := make([]string, 0, len(r.live)+1)
		ids = append(ids, r.self)
		for id := range r.live {
			ids = append(ids, id)
		}
		r.digest, r.digested = DigestOf(ids), true
	}
	return r.digest
}

// DigestOf hashes a set of member ids (in any order).
func DigestOf(ids []string) uint64 {
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	h := fnv.New64a()
	for _, id := range slices.Compact(sorted) {
		_, _ = h.Write([]byte(id))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}

// MonitorTargets are the endpoints that the member at self checks in
// round: its neighbours in the binomial graph over hosts and self
// (sorted, so that every member given the same hosts computes the same
// graph, and each endpoint is checked by its about 2·log2(n) neighbours),
// and one more endpoint that changes every round, so that a member whose
// neighbours are all down, or who is known to only some members, is
// still found.
func MonitorTargets(hosts []string, self string, round uint64) []string {
	all := slices.Clone(hosts)
	all = append(all, self)
	slices.Sort(all)
	all = slices.Compact(all)
	o, err := NewOverlay(all, self)
	if err != nil {
		return nil
	}
	out := o.Neighbors()
	others := make([]string, 0, len(all))
	for _, h := range all {
		if h != self && !slices.Contains(out, h) {
			others = append(others, h)
		}
	}
	if len(others) > 0 {
		// Start from self's rank: members rotate through different
		// endpoints in the same round.
		out = append(out, others[(uint64(o.Rank(self))+round)%uint64(len(others))])
	}
	return out
}
