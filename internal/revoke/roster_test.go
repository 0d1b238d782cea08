package revoke

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

var t0 = time.Unix(1_000_000, 0)

func liveIDs[T any](r *Roster[T]) []string {
	var out []string
	for _, e := range r.Live() {
		out = append(out, e.ID)
	}
	return out
}

// TestRosterDeadBeatsLive: a dead incarnation never comes back, by gossip
// or by its own answer, in whatever order the news arrives; a new
// incarnation at its endpoint replaces it.
func TestRosterDeadBeatsLive(t *testing.T) {
	a := NewRoster[int]("self", 10, 10, time.Minute)
	b := NewRoster[int]("other", 10, 10, time.Minute)
	a.Observe(t0, "h1:1", "x", 1)
	b.Kill(t0, "x")
	// Either direction of a merge ends with x dead at both.
	b.Merge(t0, a.Live(), a.Dead())
	a.Merge(t0, b.Live(), b.Dead())
	if slices.Contains(liveIDs(a), "x") || slices.Contains(liveIDs(b), "x") {
		t.Fatalf("a dead id is live again: a %v, b %v", liveIDs(a), liveIDs(b))
	}
	if a.Observe(t0, "h1:1", "x", 1) {
		t.Fatal("the dead incarnation's own answer brought it back")
	}
	if !a.Observe(t0, "h1:1", "x2", 2) || !slices.Equal(liveIDs(a), []string{"x2"}) {
		t.Fatalf("a new incarnation at x's endpoint: live %v, want [x2]", liveIDs(a))
	}
	// One endpoint, one incarnation: the next one there ends x2.
	a.Observe(t0, "h1:1", "x3", 3)
	if !slices.Equal(liveIDs(a), []string{"x3"}) || !a.IsDead("x2") {
		t.Fatalf("x3 answered at x2's endpoint: live %v, x2 dead %v", liveIDs(a), a.IsDead("x2"))
	}
	// Never self, whoever says so.
	a.Merge(t0, []RosterEntry[int]{{ID: "self", Host: "h:1"}}, []string{"self"})
	if slices.Contains(liveIDs(a), "self") || a.IsDead("self") {
		t.Fatal("the roster lists its own member")
	}
}

// TestRosterBounds: live members past maxLive are refused, dead ids past
// maxDead forget the oldest, and dead ids expire after the TTL.
func TestRosterBounds(t *testing.T) {
	r := NewRoster[int]("self", 3, 2, time.Minute)
	var gossip []RosterEntry[int]
	for i := range 10 {
		gossip = append(gossip, RosterEntry[int]{ID: fmt.Sprint("m", i), Host: fmt.Sprint("h:", i)})
	}
	r.Merge(t0, gossip, nil)
	if n := len(r.Live()); n != 3 {
		t.Fatalf("%d live members, want the bound 3", n)
	}
	r.Kill(t0, "d1")
	r.Kill(t0.Add(time.Second), "d2")
	r.Kill(t0.Add(2*time.Second), "d3")
	if got := r.Dead(); !slices.Equal(got, []string{"d2", "d3"}) {
		t.Fatalf("dead %v, want the 2 newest", got)
	}
	r.Expire(t0.Add(time.Minute + time.Second))
	if got := r.Dead(); !slices.Equal(got, []string{"d3"}) {
		t.Fatalf("dead %v after d2's TTL, want [d3]", got)
	}
}

// TestRosterDigest: equal live sets have equal digests, whoever lists
// whom as self; a change changes it.
func TestRosterDigest(t *testing.T) {
	a := NewRoster[int]("a", 10, 10, time.Minute)
	b := NewRoster[int]("b", 10, 10, time.Minute)
	a.Observe(t0, "b:1", "b", 0)
	b.Observe(t0, "a:1", "a", 0)
	if a.Digest() != b.Digest() {
		t.Fatal("a and b list the same two members with different digests")
	}
	before := a.Digest()
	a.Observe(t0, "c:1", "c", 0)
	if a.Digest() == before {
		t.Fatal("a new member left the digest unchanged")
	}
	a.Kill(t0, "c")
	if a.Digest() != before {
		t.Fatal("the digest does not come back with the live set")
	}
}

// TestMonitorTargetsAreLogarithmic: each member checks at most
// 2·⌈log2 n⌉+1 endpoints a round, and every endpoint is checked by at
// least ⌈log2 n⌉ members in every round (the binomial graph's degree).
func TestMonitorTargetsAreLogarithmic(t *testing.T) {
	for _, n := range []int{1, 2, 3, 8, 24, 48, 64, 100, 1024} {
		hosts := make([]string, n)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("10.0.%d.%d:7946", i/256, i%256)
		}
		k := bits.Len(uint(n - 1)) // ⌈log2 n⌉
		for round := range uint64(3) {
			checkedBy := map[string]int{}
			for _, self := range hosts {
				targets := MonitorTargets(hosts, self, round)
				if len(targets) > 2*k+1 {
					t.Fatalf("n=%d: %s checks %d endpoints, more than 2·%d+1", n, self, len(targets), k)
				}
				if slices.Contains(targets, self) {
					t.Fatalf("n=%d: %s checks itself", n, self)
				}
				for _, h := range targets {
					checkedBy[h]++
				}
			}
			for _, h := range hosts {
				if n > 1 && checkedBy[h] < k {
					t.Fatalf("n=%d round %d: %s is checked by %d members, want at least %d", n, round, h, checkedBy[h], k)
				}
			}
		}
	}
}

// simMember is one member of the dissemination simulation.
type simMember struct {
	host   string
	id     string
	up     bool
	roster *Roster[string]
}

// simRound runs one synchronous round: every live member checks its
// targets (observing the live ones, killing the dead ones) and pulls the
// roster of each target whose digest differed from its own as the
// round began (what a target answers is its state before the round).
func simRound(ms map[string]*simMember, hosts []string, round uint64, now time.Time) {
	type state struct {
		live   []RosterEntry[string]
		dead   []string
		digest uint64
	}
	before := map[string]state{}
	for h, m := range ms {
		before[h] = state{m.roster.Live(), m.roster.Dead(), m.roster.Digest()}
	}
	for _, h := range hosts {
		m := ms[h]
		if !m.up {
			continue
		}
		for _, th := range MonitorTargets(hosts, h, round) {
			tm := ms[th]
			if !tm.up {
				for _, e := range m.roster.Live() {
					if e.Host == th {
						m.roster.Kill(now, e.ID) // a refused check
					}
				}
				continue
			}
			m.roster.Observe(now, th, tm.id, tm.host)
			if b := before[th]; b.digest != before[h].digest {
				m.roster.Merge(now, b.live, b.dead)
			}
		}
	}
}

func simConverged(ms map[string]*simMember, want []string) bool {
	for _, m := range ms {
		if !m.up {
			continue
		}
		live := append(liveIDs(m.roster), m.id)
		slices.Sort(live)
		if !slices.Equal(live, want) {
			return false
		}
	}
	return true
}

// TestRosterDisseminatesOverTheOverlay: members that check only their
// binomial-graph neighbours (and one rotating endpoint) learn of every
// join and of a death within O(log n) rounds, although each member
// observes only O(log n) others directly.
func TestRosterDisseminatesOverTheOverlay(t *testing.T) {
	for _, n := range []int{8, 64, 256} {
		rng := rand.New(rand.NewPCG(uint64(n), 1))
		hosts := make([]string, n)
		ms := map[string]*simMember{}
		var ids []string
		for i := range hosts {
			hosts[i] = fmt.Sprintf("10.%d.%d.1:7946", i/256, i%256)
			id := fmt.Sprintf("%s#%08x", hosts[i], rng.Uint32())
			ms[hosts[i]] = &simMember{host: hosts[i], id: id, up: true, roster: NewRoster[string](id, 4096, 4096, time.Hour)}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		bound := 2*bits.Len(uint(n-1)) + 2
		now := t0
		rounds := 0
		for ; rounds < bound && !simConverged(ms, ids); rounds++ {
			simRound(ms, hosts, uint64(rounds), now)
			now = now.Add(time.Second)
		}
		if !simConverged(ms, ids) {
			t.Fatalf("n=%d: the joins did not reach every member within %d rounds", n, bound)
		}
		t.Logf("n=%d: every member knows every other after %d rounds", n, rounds)

		victim := ms[hosts[rng.IntN(n)]]
		victim.up = false
		want := slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == victim.id })
		start := rounds
		for ; rounds-start < bound && !simConverged(ms, want); rounds++ {
			simRound(ms, hosts, uint64(rounds), now)
			now = now.Add(time.Second)
		}
		if !simConverged(ms, want) {
			t.Fatalf("n=%d: %s's death did not reach every member within %d rounds", n, victim.id, bound)
		}
		t.Logf("n=%d: every member knows of the death after %d rounds", n, rounds-start)
	}
}
