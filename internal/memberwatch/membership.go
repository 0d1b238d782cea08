// Package memberwatch is how the automanaged members watch each other, as
// a pure core: which endpoints a member checks in a round, when a check
// that missed is handed to other members to try (an indirect probe),
// when misses take a member out of the topology, which peers' rosters
// to pull when their digest differs, and how a pulled roster merges. The
// cluster's automanaged provider (internal/member/seed_provider.go) steps it
// with the answers of its HTTP checks, the simulator (sim) with those of
// modelled links: both give it time as a value, and it keeps no clock,
// lock or socket.
//
// Each member checks only its binomial-graph neighbours among the
// endpoints it knows and one more endpoint per round
// (revoke.MonitorTargets): O(log n) checks per interval, each member
// checked by about 2·log2(n) others. The rest it learns from the members
// it checks: every answer carries a digest of the answerer's roster, and
// a checker whose own differs pulls it and merges it (revoke.Roster: a
// dead incarnation never comes back), so that joins and deaths spread
// over the overlay in O(log n) rounds.
package memberwatch

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// The defaults of a Config's bounds (a zero field takes them).
const (
	// DefaultMaxLearned bounds the learned endpoints a member knows; new
	// ones beyond it are refused until some are forgotten. It is the
	// roster's bound: a member given a few seeds learns every other
	// member's endpoint from the rosters it pulls, and a member no other
	// has learned is checked by none (at 256, 512 members given three
	// seeds never formed in the simulator). A learned endpoint costs a
	// check per round only where the overlay makes it a neighbour.
	DefaultMaxLearned = DefaultMaxLive
	// DefaultLearnedTTL and DefaultLearnedMisses: a learned endpoint is
	// forgotten once it has not answered (for this cluster) for the TTL
	// and missed at least that many checks in a row since. The TTL
	// outlasts a restart or a long pause of a member; the misses keep a
	// member that was itself paused from forgetting everything on its
	// first round back.
	DefaultLearnedTTL    = 2 * time.Minute
	DefaultLearnedMisses = 10
	// DefaultMaxLive bounds the live members a roster holds (and a pulled
	// roster may name), DefaultMaxDead the dead ids it remembers.
	DefaultMaxLive = 4096
	DefaultMaxDead = 4096
	// DefaultDeadTTL is how long a dead id is remembered: far longer than
	// its news takes to spread, so that a stale roster cannot bring it
	// back.
	DefaultDeadTTL = 5 * time.Minute
	// DefaultIndirectProbes is how many other members a monitor asks to
	// check an endpoint it missed.
	DefaultIndirectProbes = 3
)

// Config sets a Monitor's tolerance and bounds.
type Config struct {
	// Misses is how many checks in a row a member may miss and stay (at
	// least 1).
	Misses int
	// MaxLearned, LearnedTTL and LearnedMisses bound the learned
	// endpoints (zero: the defaults).
	MaxLearned    int
	LearnedTTL    time.Duration
	LearnedMisses int
	// MaxLive, MaxDead and DeadTTL bound the roster (zero: the defaults).
	MaxLive int
	MaxDead int
	DeadTTL time.Duration
	// IndirectProbes is how many members are asked to check an endpoint
	// that missed (zero: DefaultIndirectProbes).
	IndirectProbes int
	// NoPull keeps the roster to what this member's own checks see.
	NoPull bool
}

// Check is one check of an endpoint as the shell saw it: its answer, or
// why there was none.
type Check[I any] struct {
	Host string
	// Answered: the endpoint answered, as member ID with Info; Ours says
	// it answered for this member's cluster, View is its roster's digest
	// (DigestString; "" if it sent none).
	Answered bool
	ID       string
	Info     I
	Ours     bool
	View     string
	// Err is why it did not answer; Refused, that nothing listens there
	// (the process is gone: its member leaves at once).
	Err     error
	Refused bool
}

// Miss is why a member was last missed by the checks. It matches
// messages.ErrUnavailable with errors.Is and unwraps to the check's own
// error.
type Miss struct {
	Host   string
	Missed int
	Err    error
}

func (e *Miss) Error() string {
	return fmt.Sprintf("%d consecutive failed health checks of %s, the last: %v", e.Missed, e.Host, e.Err)
}

// Unwrap is the last failed check's error.
func (e *Miss) Unwrap() error { return e.Err }

// Is makes errors.Is(err, messages.ErrUnavailable) true.
func (e *Miss) Is(target error) bool { return messages.ErrUnavailable.Is(target) }

// health is what the checks know of one endpoint.
type health struct {
	lastID string // the member it last answered as; "": not in the topology
	missed int    // checks missed in a row since
	// firstMiss is when the first of them was judged: misses that come
	// fast (connections reset by a busy member, errors) drop a member no
	// sooner than misses that time out would.
	firstMiss time.Time
	err       *Miss  // why it was last missed, or nil
	errID     string // the member err is about
	// For forgetting learned endpoints: when it last answered for this
	// cluster (or was first checked), the checks missed since, and
	// whether it ever answered.
	seen     time.Time
	down     int
	answered bool
}

// Monitor is one member's membership state: the endpoints it knows
// (configured, then learned), what its checks saw of each, and its
// roster of the cluster. I is what a member publishes of itself.
type Monitor[I any] struct {
	cfg     Config
	self    string // this member's endpoint ("" before Start)
	hosts   []string
	known   map[string]bool // by endpoint: true for the configured
	fresh   []string        // learned since the last round: checked in the next
	learned int
	health  map[string]*health
	roster  *revoke.Roster[I]
	rounds  uint64
	// at lists the live members by endpoint, rebuilt after the roster
	// may have changed (atStale): a member of 1,024 looks endpoints up
	// for every miss and probe.
	at      map[string]string
	atCount map[string]int // live members per endpoint
	atStale bool
	// overlay is the binomial graph over hosts and self, others the
	// hosts not its neighbours, kept until hosts change (overlayStale):
	// revoke.MonitorTargets, without sorting the hosts every round.
	overlay      *revoke.Overlay
	others       []string
	overlayStale bool
}

// New returns the Monitor of a member given seeds (endpoints that are
// never forgotten).
func New[I any](cfg Config, seeds []string) *Monitor[I] {
	cfg.Misses = max(cfg.Misses, 1)
	if cfg.MaxLearned <= 0 {
		cfg.MaxLearned = DefaultMaxLearned
	}
	if cfg.LearnedTTL <= 0 {
		cfg.LearnedTTL = DefaultLearnedTTL
	}
	if cfg.LearnedMisses <= 0 {
		cfg.LearnedMisses = DefaultLearnedMisses
	}
	if cfg.MaxLive <= 0 {
		cfg.MaxLive = DefaultMaxLive
	}
	if cfg.MaxDead <= 0 {
		cfg.MaxDead = DefaultMaxDead
	}
	if cfg.DeadTTL <= 0 {
		cfg.DeadTTL = DefaultDeadTTL
	}
	if cfg.IndirectProbes <= 0 {
		cfg.IndirectProbes = DefaultIndirectProbes
	}
	m := &Monitor[I]{cfg: cfg, known: map[string]bool{}, health: map[string]*health{},
		roster: revoke.NewRoster[I]("", cfg.MaxLive, cfg.MaxDead, cfg.DeadTTL)}
	for _, h := range seeds {
		if h != "" && !m.known[h] {
			m.known[h] = true
			m.hosts = append(m.hosts, h)
		}
	}
	return m
}

// Config is the Monitor's configuration, defaults filled in.
func (m *Monitor[I]) Config() Config { return m.cfg }

// Start makes the Monitor member id's, at endpoint self: its roster
// starts empty (it never lists id).
func (m *Monitor[I]) Start(self, id string) {
	m.self, m.overlayStale = self, true
	m.roster = revoke.NewRoster[I](id, m.cfg.MaxLive, m.cfg.MaxDead, m.cfg.DeadTTL)
	m.atStale = true
}

// liveAt is the id of the live member the roster lists at host ("" if
// none).
func (m *Monitor[I]) liveAt(host string) string {
	if m.at == nil || m.atStale {
		m.at, m.atCount = map[string]string{}, map[string]int{}
		for _, e := range m.roster.Live() {
			m.at[e.Host] = e.ID
			m.atCount[e.Host]++
		}
		m.atStale = false
	}
	return m.at[host]
}

// Lists reports whether the roster lists member id as live.
func (m *Monitor[I]) Lists(id string) bool {
	_, ok := m.roster.Lookup(id)
	return ok
}

// Size is how many live members the roster lists (self not included).
func (m *Monitor[I]) Size() int { return len(m.roster.Live()) }

// Self is this member's endpoint ("" before Start).
func (m *Monitor[I]) Self() string { return m.self }

// Learn adds the hosts it does not know as learned endpoints (those
// valid accepts), up to MaxLearned of them, and returns those it added
// and how many it refused as invalid and for lack of room. A shell that
// added any starts a round soon: they are checked in the next.
func (m *Monitor[I]) Learn(hosts []string, valid func(string) error) (added []string, invalid, full int) {
	for _, h := range hosts {
		if _, ok := m.known[h]; ok {
			continue // configured, or learned already
		}
		if valid != nil && valid(h) != nil {
			invalid++
			continue
		}
		if m.learned >= m.cfg.MaxLearned {
			full++
			continue
		}
		m.known[h] = false
		m.hosts = append(m.hosts, h)
		m.fresh = append(m.fresh, h)
		m.learned++
		m.overlayStale = true
		added = append(added, h)
	}
	return added, invalid, full
}

// Forget stops checking the learned ones of hosts (the configured stay)
// and returns those it forgot.
func (m *Monitor[I]) Forget(hosts []string) []string {
	var gone []string
	for _, h := range hosts {
		if configured, ok := m.known[h]; ok && !configured {
			delete(m.known, h)
			delete(m.health, h)
			gone = append(gone, h)
			m.learned--
			m.overlayStale = true
		}
	}
	if len(gone) > 0 {
		m.hosts = slices.DeleteFunc(m.hosts, func(h string) bool { return slices.Contains(gone, h) })
		m.fresh = slices.DeleteFunc(m.fresh, func(h string) bool { return slices.Contains(gone, h) })
	}
	return gone
}

// Hosts are the endpoints known, configured first (a copy).
func (m *Monitor[I]) Hosts() []string { return slices.Clone(m.hosts) }

// Learned is how many of them were learned.
func (m *Monitor[I]) Learned() int { return m.learned }

// Known reports whether host is an endpoint this member checks or a
// live member's.
func (m *Monitor[I]) Known(host string) bool {
	if _, ok := m.known[host]; ok {
		return true
	}
	return m.liveAt(host) != ""
}

// Gossip is the endpoints worth passing on: the configured ones, live
// members', and the learned ones that answered for this cluster. A
// made-up endpoint posted to one member stays with it until forgotten.
func (m *Monitor[I]) Gossip() []string {
	members := map[string]bool{}
	for _, e := range m.roster.Live() {
		members[e.Host] = true
	}
	return slices.DeleteFunc(slices.Clone(m.hosts), func(h string) bool {
		hh := m.health[h]
		return !m.known[h] && !members[h] && (hh == nil || !hh.answered)
	})
}

// Targets begins a round: the endpoints to check in it, this member's
// monitoring targets (revoke.MonitorTargets) and the endpoints learned
// since the last round, each checked once whatever its place in the
// overlay (a joiner is listed, and spread, a round later).
func (m *Monitor[I]) Targets() []string {
	targets := m.monitorTargets()
	m.rounds++
	for _, h := range m.fresh {
		if h != m.self && !slices.Contains(targets, h) && slices.Contains(m.hosts, h) {
			targets = append(targets, h)
		}
	}
	m.fresh = nil
	return targets
}

// monitorTargets is revoke.MonitorTargets(m.hosts, m.self, m.rounds),
// the overlay kept from round to round while the hosts stay the same.
func (m *Monitor[I]) monitorTargets() []string {
	if m.overlay == nil || m.overlayStale {
		all := slices.Clone(m.hosts)
		all = append(all, m.self)
		slices.Sort(all)
		all = slices.Compact(all)
		o, err := revoke.NewOverlay(all, m.self)
		if err != nil {
			return nil
		}
		nbrs := o.Neighbors()
		m.others = m.others[:0]
		for _, h := range all {
			if h != m.self && !slices.Contains(nbrs, h) {
				m.others = append(m.others, h)
			}
		}
		m.overlay, m.overlayStale = o, false
	}
	out := m.overlay.Neighbors()
	if len(m.others) > 0 {
		out = append(out, m.others[(uint64(m.overlay.Rank(m.self))+m.rounds)%uint64(len(m.others))])
	}
	return out
}

// Rounds is how many rounds began.
func (m *Monitor[I]) Rounds() uint64 { return m.rounds }

// ListedAt is the id of the live member at host, by this member's
// checks or its roster ("" if none).
func (m *Monitor[I]) ListedAt(host string) string {
	if h := m.health[host]; h != nil && h.lastID != "" {
		return h.lastID
	}
	return m.liveAt(host)
}

// Indirect says whether a check that did not answer goes to other
// members before its miss counts, and as which member they should find
// the endpoint: a member listed there that this one could not reach
// (not refused: nothing listening is no path's fault).
func (m *Monitor[I]) Indirect(c Check[I]) (id string, ok bool) {
	if c.Answered || c.Refused {
		return "", false
	}
	id = m.ListedAt(c.Host)
	return id, id != ""
}

// Helpers are the members asked to check host (expected to answer as
// id) for this one: up to IndirectProbes live members, neither this one
// nor the target, in the order shuffle leaves them (the shell's random
// source).
func (m *Monitor[I]) Helpers(host, id string, shuffle func(n int, swap func(i, j int))) []string {
	var via []string
	for _, e := range m.roster.Live() {
		if e.Host != host && e.Host != m.self && e.ID != id {
			via = append(via, e.Host)
		}
	}
	if shuffle != nil {
		shuffle(len(via), func(i, j int) { via[i], via[j] = via[j], via[i] })
	}
	return via[:min(len(via), m.cfg.IndirectProbes)]
}

// Result is what a round's answers did.
type Result struct {
	// Dropped are the members that missed too many checks: they left the
	// topology (and the roster, as dead).
	Dropped []string
	// Forgotten are the learned endpoints that missed long enough to be
	// forgotten.
	Forgotten []string
	// Pulls are the endpoints whose answer carried a digest other than
	// this member's: pull their rosters (Merge).
	Pulls []string
	// Answered: some endpoint answered.
	Answered bool
}

// Event is what a Monitor steps on: a Round's checks or a Merge of a
// pulled roster.
type Event[I any] interface{ memberwatchEvent(I) }

// Round is one round's checks. SelfUp is whether this member's own
// endpoint answered it: when it did not, this member is the likelier one
// to be stopping or starved, and no miss is counted. Window is the least
// time misses must span to drop a member: what Misses checks that time
// out take ((Misses-1)·timeout).
type Round[I any] struct {
	Window time.Duration
	SelfUp bool
	Checks []Check[I]
}

// Merge is a peer's roster (its live members and dead ids; the shell
// learns their endpoints with Learn).
type Merge[I any] struct {
	Live []revoke.RosterEntry[I]
	Dead []string
}

func (Round[I]) memberwatchEvent(I) {}
func (Merge[I]) memberwatchEvent(I) {}

// Output is what a step did: a Round's Result, or whether a Merge
// changed the live set. Its Box is empty: the shell checks endpoints
// and pulls rosters over HTTP (or the simulator's links) itself, at the
// pace it keeps (Pace).
type Output struct {
	outbox.Box
	Result
	// Changed: a Merge changed the live set.
	Changed bool
}

// Step takes one event at now: the one contract of the cores
// (outbox.Core).
func (m *Monitor[I]) Step(now time.Time, ev Event[I]) Output {
	switch e := ev.(type) {
	case Round[I]:
		return Output{Result: m.round(now, e.Window, e.SelfUp, e.Checks)}
	case Merge[I]:
		return Output{Changed: m.merge(now, e.Live, e.Dead)}
	}
	return Output{}
}

func (m *Monitor[I]) round(now time.Time, window time.Duration, selfUp bool, checks []Check[I]) Result {
	var res Result
	if selfUp {
		res.Dropped, res.Forgotten = m.judge(now, window, checks)
	}
	for _, c := range checks {
		if !c.Answered {
			continue
		}
		res.Answered = true
		if !c.Ours || m.liveAt(c.Host) == c.ID && m.atCount[c.Host] == 1 {
			continue // listed there alone already: Observe would change nothing
		}
		if m.roster.Observe(now, c.Host, c.ID, c.Info) && !m.atStale {
			if e, _ := m.roster.Lookup(c.ID); e.Host == c.Host {
				// Listed there, alone: any other there is dead.
				m.at[c.Host], m.atCount[c.Host] = c.ID, 1
			} else {
				m.atStale = true
			}
		}
	}
	for _, id := range res.Dropped {
		e, listed := m.roster.Lookup(id)
		if m.roster.Kill(now, id) && listed && !m.atStale {
			if m.atCount[e.Host]--; m.atCount[e.Host] == 0 {
				delete(m.at, e.Host)
				delete(m.atCount, e.Host)
			} else {
				m.atStale = true // another is listed there: which, the roster says
			}
		}
	}
	m.roster.Expire(now)
	mine := DigestString(m.roster.Digest())
	for _, c := range checks {
		if c.Answered && c.Ours && c.View != "" && c.View != mine && !m.cfg.NoPull {
			res.Pulls = append(res.Pulls, c.Host)
		}
	}
	return res
}

// judge records the answers endpoint by endpoint: one that answers is
// up; one that misses keeps the member it last answered as (or that the
// roster lists there) while it has missed fewer than Misses checks in a
// row, or for less than window, and did not refuse the connection.
func (m *Monitor[I]) judge(now time.Time, window time.Duration, checks []Check[I]) (dropped, forgotten []string) {
	var expired []string
	for _, c := range checks {
		h := m.health[c.Host]
		if h == nil {
			h = &health{seen: now}
			m.health[c.Host] = h
		}
		if c.Answered {
			answered, seen, down := h.answered, h.seen, h.down+1
			if c.Ours {
				answered, seen, down = true, now, 0
			}
			*h = health{lastID: c.ID, seen: seen, down: down, answered: answered}
			if down >= m.cfg.LearnedMisses && now.Sub(seen) >= m.cfg.LearnedTTL {
				expired = append(expired, c.Host) // it answers for another cluster
			}
			continue
		}
		h.down++
		if h.lastID == "" {
			// The roster lists a member there that this member has not
			// checked yet: its misses count alike.
			h.lastID = m.liveAt(c.Host)
		}
		if h.lastID == "" {
			if h.down >= m.cfg.LearnedMisses && now.Sub(h.seen) >= m.cfg.LearnedTTL {
				expired = append(expired, c.Host)
			}
			continue // not in the topology: nothing to keep
		}
		h.missed++
		if h.missed == 1 {
			h.firstMiss = now
		}
		h.err, h.errID = &Miss{Host: c.Host, Missed: h.missed, Err: c.Err}, h.lastID
		if (h.missed < m.cfg.Misses || now.Sub(h.firstMiss) < window) && !c.Refused {
			continue
		}
		dropped = append(dropped, h.lastID)
		h.lastID, h.missed = "", 0
	}
	return dropped, m.Forget(expired)
}

// Missing reports whether a member of the topology missed its last
// check: its next misses decide whether it stays, so the shell does not
// put its next round off.
func (m *Monitor[I]) Missing() bool {
	for _, h := range m.health {
		if h.lastID != "" && h.missed > 0 {
			return true
		}
	}
	return false
}

// MissOf is the miss that last counted against host's member (nil if
// none), for the shell's log.
func (m *Monitor[I]) MissOf(host string) *Miss {
	if h := m.health[host]; h != nil {
		return h.err
	}
	return nil
}

// HealthError is why member id was last missed by a check, or nil: the
// evidence for a member that left the topology.
func (m *Monitor[I]) HealthError(id string) error {
	for _, h := range m.health {
		if h.err != nil && h.errID == id {
			return h.err
		}
	}
	return nil
}

func (m *Monitor[I]) merge(now time.Time, live []revoke.RosterEntry[I], dead []string) bool {
	changed := m.roster.Merge(now, live, dead)
	m.atStale = m.atStale || changed
	return changed
}

// Live lists the live members of the roster (self not included),
// sorted by id.
func (m *Monitor[I]) Live() []revoke.RosterEntry[I] { return m.roster.Live() }

// Dead lists the ids remembered dead, sorted.
func (m *Monitor[I]) Dead() []string { return m.roster.Dead() }

// IsDead reports whether id is remembered dead.
func (m *Monitor[I]) IsDead(id string) bool { return m.roster.IsDead(id) }

// Digest is the roster's digest (self included).
func (m *Monitor[I]) Digest() uint64 { return m.roster.Digest() }

// DigestString is how a roster digest travels in an answer.
func DigestString(d uint64) string { return strconv.FormatUint(d, 16) }
