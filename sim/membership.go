package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/memberwatch"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/revoke"
)

// MembershipConfig is one simulated run of the automanaged membership:
// N members start, each given Seeds endpoints, and form a cluster; once
// every member lists all N and the cluster has idled for Idle (its
// monitoring traffic counted over that window), one member is killed,
// and once every other knows, another is paused for PauseFor.
//
// Every member runs the real core (internal/memberwatch: its targets,
// misses, indirect probes, pulls and merges, its pace) and the real
// failure broadcaster (revoke: a member whose topology loses another
// spreads a failure notice over the binomial graph, and every member it
// reaches starts a round at once, as the cluster's members actor kicks
// its provider). What the simulator models is the rest: each request and
// answer crosses a link of one-way Latency and costs MsgCost of its
// sender's and its receiver's CPU (a member handles one at a time); a
// check not answered within Timeout is missed; a killed member's port
// refuses connections (its host answers with a reset), a paused one's
// takes them and answers when it resumes.
type MembershipConfig struct {
	N    int
	Seed uint64
	// Refresh is the members' round interval (RefreshInterval), Timeout
	// a check's bound (HealthTimeout), Misses the checks in a row a
	// member may miss (HealthMisses): the node's defaults when zero.
	Refresh time.Duration
	Timeout time.Duration
	Misses  int
	Latency time.Duration
	MsgCost time.Duration
	// Seeds is how many endpoints each member is given (the first Seeds
	// members'; 0: all, as the testbed gives them).
	Seeds int
	// StartSpread: members start at uniformly random times within it.
	StartSpread time.Duration
	// Idle is how long the formed cluster idles before the kill, its
	// traffic measured over it (0: 20 s).
	Idle time.Duration
	// PauseFor is how long the paused member stops (0: 3 s).
	PauseFor time.Duration
	// Horizon bounds the run in virtual time (0: 10 minutes).
	Horizon time.Duration
	// NoNotices leaves the failure notices out: a kill spreads by the
	// members' rounds and roster pulls alone, at their pace.
	NoNotices bool
}

// MembershipOutcome is what one membership run measured.
type MembershipOutcome struct {
	Nodes int    `json:"nodes"`
	Seed  uint64 `json:"seed"`
	Seeds int    `json:"seeds"`
	// Formed is the time from the last member's start until every member
	// listed all N, FormedIntervals that in refresh intervals (what a
	// round takes when nothing kicks it); FormationRounds is the most
	// rounds one member ran in that time (kicks start rounds at once).
	Formed          time.Duration `json:"formed_ns"`
	FormedIntervals float64       `json:"formed_intervals"`
	FormationRounds int           `json:"formation_rounds"`
	// Killed is the member killed, Known the time from its kill until
	// no live member listed it, Detected until its first monitor dropped
	// it; SpreadIntervals is the time between the two in refresh
	// intervals, KnownRounds the most rounds a member ran from the kill
	// until it knew.
	Killed          string        `json:"killed"`
	Known           time.Duration `json:"known_ns"`
	Detected        time.Duration `json:"detected_ns"`
	SpreadIntervals float64       `json:"spread_intervals"`
	KnownRounds     int           `json:"known_rounds"`
	// Paused is the member paused for PauseFor; Expelled is whether any
	// member dropped it (a false expulsion).
	Paused   string        `json:"paused"`
	PauseFor time.Duration `json:"pause_for_ns"`
	Expelled bool          `json:"expelled"`
	// Over the idle window: messages (requests and answers, each
	// counted once at its sender) and bytes per member per second, and
	// checks a member made per round.
	IdleMessages float64       `json:"idle_msgs_per_member_s"`
	IdleBytes    float64       `json:"idle_bytes_per_member_s"`
	IdleCPU      float64       `json:"idle_cpu_per_member"`
	Targets      float64       `json:"targets_per_round"`
	IdleWindow   time.Duration `json:"idle_window_ns"`
	// Messages is every message of the run, Events the simulator's.
	Messages   int64    `json:"messages"`
	Events     int64    `json:"events"`
	Violations []string `json:"violations,omitempty"`
}

// Sizes of the membership's messages, in bytes on the wire (HTTP/1.1
// with keep-alive: request line and headers, then the JSON body).
const (
	healthRequestBytes = 100
	healthAnswerBytes  = 330 // headers, and a member's /_health JSON with its view
	probeRequestBytes  = 140
	pullRequestBytes   = 220
	rosterHeaderBytes  = 160
	rosterEntryBytes   = 190 // one member of a roster answer
	rosterDeadBytes    = 24  // one dead id
	// The members actor's comparison of views over Proto.Actor's remote
	// (gRPC): a hello carrying a digest, and an answer without the view
	// when the digests agree, else with about viewEntryBytes a member.
	// On the wire with their batch envelope and framing (24 members on
	// loopback: 484 bytes an exchange, 3.6 KB for a whole view).
	helloBytes        = 160
	helloAnswerBytes  = 320
	viewEntryBytes    = 150
	viewCheckInterval = 2 * time.Second  // internal/member/member_actor.go's, while views differ
	viewCheckQuiet    = 10 * time.Second // once they agreed
)

// errCheckTimeout and errRefused are a simulated check's failures.
var (
	errCheckTimeout = errors.New("health check timed out")
	errRefused      = errors.New("connection refused")
)

// simInfo is what a simulated member publishes of itself: its id is
// all the model needs.
type simInfo struct{}

// mHost is one simulated member.
type mHost struct {
	idx        int
	id, host   string
	mon        *memberwatch.Monitor[simInfo]
	pace       memberwatch.Pace
	bc         *revoke.Broadcaster
	rng        *rand.Rand
	started    bool
	alive      bool
	pauseUntil time.Duration
	free       time.Duration // its CPU is busy until then
	inRound    bool
	kicked     bool
	gen        uint64 // the scheduled round's; a kick makes it stale
	// viewAgreed: every neighbour's answer to its last comparison of
	// views agreed with the digest it sent, viewSent.
	viewAgreed bool
	viewSent   uint64
	digest     uint64 // its topology's at the last round's end
	startAt    time.Duration
	// formedRound is the rounds it had run when it first listed all N
	// (0: not yet); knewAt and knewRound, when it stopped listing the
	// killed member.
	formedRound    uint64
	lastStartRound uint64 // the rounds it had run when the last member started
	formedAt       time.Duration
	knewAt         time.Duration
	killRound      uint64
	knewRound      uint64
	msgs, bytes    int64
	cpu            time.Duration
	targets        int64
	rounds         int64
}

// msim is the membership simulation.
type msim struct {
	c       MembershipConfig
	eng     *engine
	hosts   []*mHost
	byHost  map[string]*mHost
	byID    map[string]*mHost
	full    uint64 // the digest of all N ids
	killed  *mHost
	killAt  time.Duration
	detect  time.Duration
	paused  *mHost
	msgs    int64
	viol    []string
	expelAt time.Duration
}

// RunMembership simulates c.
func RunMembership(c MembershipConfig) (*MembershipOutcome, error) {
	return RunMembershipContext(context.Background(), c)
}

// RunMembershipContext is RunMembership, which ends with ctx's error as
// soon as ctx is done.
func RunMembershipContext(ctx context.Context, c MembershipConfig) (*MembershipOutcome, error) {
	if c.N < 4 {
		return nil, fmt.Errorf("sim: membership of %d members: need at least 4 (one killed, one paused)", c.N)
	}
	if c.Seeds < 0 || c.Seeds > c.N {
		return nil, fmt.Errorf("sim: %d seeds of %d members: want 0 (all) to %d", c.Seeds, c.N, c.N)
	}
	if c.Refresh <= 0 {
		c.Refresh = 200 * time.Millisecond
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	if c.Misses <= 0 {
		c.Misses = 3
	}
	if c.Idle <= 0 {
		c.Idle = 20 * time.Second
	}
	if c.PauseFor <= 0 {
		c.PauseFor = 3 * time.Second
	}
	if c.Horizon <= 0 {
		c.Horizon = 10 * time.Minute
	}
	s := &msim{c: c, eng: &engine{done: ctx.Done()}, byHost: map[string]*mHost{}, byID: map[string]*mHost{}}
	rng := rand.New(rand.NewPCG(c.Seed, 0x6d656d))
	ids := make([]string, c.N)
	for i := range c.N {
		h := &mHost{idx: i, id: fmt.Sprintf("m%04d", i), host: fmt.Sprintf("h%04d:7946", i),
			rng: rand.New(rand.NewPCG(c.Seed, uint64(i)+1))}
		ids[i] = h.id
		s.hosts = append(s.hosts, h)
		s.byHost[h.host], s.byID[h.id] = h, h
	}
	s.full = revoke.DigestOf(ids)
	nSeeds := c.Seeds
	if nSeeds == 0 {
		nSeeds = c.N
	}
	seeds := make([]string, nSeeds)
	for i := range seeds {
		seeds[i] = s.hosts[i].host
	}
	var last time.Duration
	for _, h := range s.hosts {
		if c.StartSpread > 0 {
			h.startAt = time.Duration(rng.Int64N(int64(c.StartSpread)))
		}
		last = max(last, h.startAt)
	}
	s.eng.at(last, func() {
		for _, h := range s.hosts {
			h.lastStartRound = h.mon.Rounds()
		}
	})
	for _, h := range s.hosts {
		h.mon = memberwatch.New[simInfo](memberwatch.Config{Misses: c.Misses}, append([]string{h.host}, seeds...))
		h.mon.Start(h.host, h.id)
		h.pace = memberwatch.NewPace(c.Refresh)
		o, err := revoke.NewOverlay(ids, h.id)
		if err != nil {
			return nil, err
		}
		h.bc = revoke.NewBroadcaster(o)
		s.eng.at(h.startAt, func() {
			h.started, h.alive, h.digest = true, true, h.mon.Digest()
			s.schedule(h, s.eng.now)
			s.on(h, s.eng.now+viewCheckInterval, func() { s.compareViews(h) })
		})
	}
	out := &MembershipOutcome{Nodes: c.N, Seed: c.Seed, Seeds: c.Seeds, PauseFor: c.PauseFor}
	// Formation: every member lists all N.
	s.eng.run(c.Horizon, func() bool { return s.formed() })
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sim: membership of %d stopped at %v of virtual time: %w", c.N, s.eng.now, ctx.Err())
	}
	if !s.formed() {
		return nil, fmt.Errorf("sim: %d members did not form within %v", c.N, c.Horizon)
	}
	formedAt := s.eng.now
	out.Formed = formedAt - last
	out.FormedIntervals = out.Formed.Seconds() / c.Refresh.Seconds()
	for _, h := range s.hosts {
		out.FormationRounds = max(out.FormationRounds, int(h.formedRound-h.lastStartRound))
	}
	// The idle window: the pace quiets, then the traffic is counted.
	settle := memberwatch.QuietFactor * c.Refresh * 4
	s.eng.run(formedAt+settle, nil)
	before := s.snapshot()
	s.eng.run(formedAt+settle+c.Idle, nil)
	after := s.snapshot()
	out.IdleWindow = c.Idle
	per := float64(c.N) * c.Idle.Seconds()
	out.IdleMessages = float64(after.msgs-before.msgs) / per
	out.IdleBytes = float64(after.bytes-before.bytes) / per
	out.IdleCPU = (after.cpu - before.cpu).Seconds() / per
	if r := after.rounds - before.rounds; r > 0 {
		out.Targets = float64(after.targets-before.targets) / float64(r)
	}
	// The kill: a member that is no seed (seeds stay configured
	// everywhere), chosen by the seed.
	victims := s.hosts[min(nSeeds, c.N-2):]
	s.killed = victims[rng.IntN(len(victims))]
	s.killAt = s.eng.now
	out.Killed = s.killed.id
	s.kill(s.killed)
	s.eng.run(c.Horizon, func() bool { return s.knowKill() })
	if !s.knowKill() {
		s.violate("the kill of %s was not known to every member within %v", s.killed.id, c.Horizon)
	} else {
		out.Known = s.eng.now - s.killAt
		out.Detected = s.detect - s.killAt
		out.SpreadIntervals = (out.Known - out.Detected).Seconds() / c.Refresh.Seconds()
		for _, h := range s.hosts {
			if h.alive {
				out.KnownRounds = max(out.KnownRounds, int(h.knewRound-h.killRound))
			}
		}
	}
	// The pause: another member that is no seed stops for PauseFor;
	// the run goes on for 30 s after it resumes (past the misses' window
	// and the quiet pace).
	for {
		p := victims[rng.IntN(len(victims))]
		if p != s.killed {
			s.paused = p
			break
		}
	}
	out.Paused = s.paused.id
	s.eng.run(s.eng.now+10*time.Second, nil)
	s.paused.pauseUntil = s.eng.now + c.PauseFor
	s.eng.run(s.eng.now+c.PauseFor+30*time.Second, nil)
	for _, h := range s.hosts {
		if h.alive && h != s.paused && !h.mon.Lists(s.paused.id) {
			out.Expelled = true
			s.violate("%s does not list %s, paused for %v, 30 s after it resumed", h.id, s.paused.id, c.PauseFor)
		}
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sim: membership of %d stopped at %v of virtual time: %w", c.N, s.eng.now, ctx.Err())
	}
	out.Messages, out.Events = s.msgs, s.eng.steps
	out.Violations = s.viol
	return out, nil
}

type mSnapshot struct {
	msgs, bytes, targets, rounds int64
	cpu                          time.Duration
}

func (s *msim) snapshot() mSnapshot {
	var t mSnapshot
	for _, h := range s.hosts {
		t.msgs += h.msgs
		t.bytes += h.bytes
		t.cpu += h.cpu
		t.targets += h.targets
		t.rounds += h.rounds
	}
	return t
}

func (s *msim) violate(format string, args ...any) {
	if len(s.viol) < 100 {
		s.viol = append(s.viol, fmt.Sprintf("t=%v: ", s.eng.now)+fmt.Sprintf(format, args...))
	}
}

// formed: every member lists all N.
func (s *msim) formed() bool {
	for _, h := range s.hosts {
		if h.formedRound == 0 {
			return false
		}
	}
	return true
}

// knowKill: no live member lists the killed one.
func (s *msim) knowKill() bool {
	for _, h := range s.hosts {
		if h.alive && h.knewAt == 0 {
			return false
		}
	}
	return true
}

// kill stops h: its events are dropped, its port refuses.
func (s *msim) kill(h *mHost) {
	h.alive = false
	for _, o := range s.hosts {
		o.killRound = o.mon.Rounds()
	}
}

// on runs fn at t on h's process: not if h is dead, and not before a
// pause of h ends.
func (s *msim) on(h *mHost, t time.Duration, fn func()) {
	s.eng.at(t, func() {
		if !h.alive {
			return
		}
		if s.eng.now < h.pauseUntil {
			s.on(h, h.pauseUntil, fn)
			return
		}
		fn()
	})
}

// work has h's CPU spend cost, after what it has taken on already (and
// not while it is paused), and returns when it is done.
func (s *msim) work(h *mHost, cost time.Duration) time.Duration {
	start := max(s.eng.now, h.free, h.pauseUntil)
	h.free = start + cost
	h.cpu += cost
	return h.free
}

// msgCost is the CPU a message of size bytes costs each end.
func (s *msim) msgCost(size int) time.Duration {
	return s.c.MsgCost + time.Duration(float64(s.c.MsgCost)*float64(size)/4096)
}

// call sends a request of size bytes from a to b. serve runs on b's
// process once b's CPU has taken the request in, and answers (or not)
// with reply; done runs once on a's process: with the answer, on a
// refused connection (b is not running), or at timeout.
func (s *msim) call(a, b *mHost, size int, timeout time.Duration, serve func(reply func(size int, v any)), done func(v any, ok, refused bool)) {
	finished := false
	finish := func(v any, ok, refused bool) {
		if !finished {
			finished = true
			done(v, ok, refused)
		}
	}
	a.msgs++
	a.bytes += int64(size)
	s.msgs++
	lat := s.c.Latency
	if a == b {
		lat = 0
	}
	depart := s.work(a, s.msgCost(size))
	s.on(a, s.eng.now+timeout, func() { finish(nil, false, false) })
	s.eng.at(depart+lat, func() {
		if b == nil || !b.alive {
			s.on(a, s.eng.now+lat, func() { finish(nil, false, true) })
			return
		}
		s.on(b, s.work(b, s.msgCost(size)), func() {
			serve(func(rsize int, v any) {
				b.msgs++
				b.bytes += int64(rsize)
				s.msgs++
				sent := s.work(b, s.msgCost(rsize))
				s.eng.at(sent+lat, func() {
					s.on(a, s.work(a, s.msgCost(rsize)), func() { finish(v, true, false) })
				})
			})
		})
	})
}

// schedule starts h's next round at t (a round already scheduled is
// dropped).
func (s *msim) schedule(h *mHost, t time.Duration) {
	h.gen++
	gen := h.gen
	s.on(h, t, func() {
		if h.gen == gen {
			s.round(h)
		}
	})
}

// kick is the real provider's Kick: the next round now, and at the
// base interval again.
func (s *msim) kick(h *mHost) {
	h.pace.Kick()
	if h.inRound {
		h.kicked = true
		return
	}
	s.schedule(h, s.eng.now)
}

// health is a member's /_health answer.
type health struct {
	id   string
	view string
}

// serveHealth answers a health check at b.
func serveHealth(b *mHost) func(reply func(int, any)) {
	return func(reply func(int, any)) {
		reply(healthAnswerBytes, health{id: b.id, view: memberwatch.DigestString(b.mon.Digest())})
	}
}

// checkOf is a health check's outcome as the core takes it.
func checkOf(host string, v any, ok, refused bool) memberwatch.Check[simInfo] {
	if !ok {
		err := errCheckTimeout
		if refused {
			err = errRefused
		}
		return memberwatch.Check[simInfo]{Host: host, Err: err, Refused: refused}
	}
	a := v.(health)
	return memberwatch.Check[simInfo]{Host: host, Answered: true, ID: a.id, Ours: true, View: a.view}
}

// round is one round of h's provider (internal/member/seed_provider.go's round
// and poll): its own endpoint and its targets checked at once, an
// indirect probe for each that missed, the answers judged, the rosters
// that differ pulled, the topology published, the next round paced.
func (s *msim) round(h *mHost) {
	h.inRound = true
	h.rounds++
	targets := h.mon.Targets()
	h.targets += int64(len(targets))
	checks := make([]memberwatch.Check[simInfo], len(targets))
	pending := len(targets) + 1
	selfUp := false
	finish := func() {
		if pending--; pending == 0 {
			s.judge(h, checks, selfUp)
		}
	}
	s.call(h, h, healthRequestBytes, s.c.Timeout, serveHealth(h), func(v any, ok, _ bool) {
		selfUp = ok && v.(health).id == h.id
		finish()
	})
	for i, t := range targets {
		b := s.byHost[t]
		s.call(h, b, healthRequestBytes, s.c.Timeout, serveHealth(b), func(v any, ok, refused bool) {
			checks[i] = checkOf(t, v, ok, refused)
			id, indirect := h.mon.Indirect(checks[i])
			if !indirect {
				finish()
				return
			}
			s.indirect(h, t, id, func(a *health) {
				if a != nil {
					checks[i] = checkOf(t, *a, true, false)
				}
				finish()
			})
		})
	}
}

// indirect asks the core's helpers to check host (as member id) for h;
// done gets the first answer that names id, or nil.
func (s *msim) indirect(h *mHost, host, id string, done func(*health)) {
	via := h.mon.Helpers(host, id, h.rng.Shuffle)
	if len(via) == 0 {
		done(nil)
		return
	}
	left, over := len(via), false
	for _, v := range via {
		vh := s.byHost[v]
		serve := func(reply func(int, any)) {
			if !vh.mon.Known(host) {
				reply(60, nil) // not a known member endpoint
				return
			}
			s.call(vh, s.byHost[host], healthRequestBytes, s.c.Timeout, serveHealth(s.byHost[host]), func(a any, ok, _ bool) {
				if ok {
					reply(healthAnswerBytes, a)
				} else {
					reply(80, nil) // gateway timeout
				}
			})
		}
		s.call(h, vh, probeRequestBytes, 2*s.c.Timeout, serve, func(a any, ok, _ bool) {
			if over {
				return
			}
			if ans, named := a.(health); ok && named && ans.id == id {
				over = true
				done(&ans)
				return
			}
			if left--; left == 0 {
				over = true
				done(nil)
			}
		})
	}
}

// roster is a pulled roster answer.
type roster struct {
	live []revoke.RosterEntry[simInfo]
	dead []string
}

// judge hands a round's checks to h's core, pulls the rosters it names,
// then ends the round.
func (s *msim) judge(h *mHost, checks []memberwatch.Check[simInfo], selfUp bool) {
	window := time.Duration(s.c.Misses-1) * s.c.Timeout
	res := mWatchDriver.step(s, h, h.mon, memberwatch.Round[simInfo]{Window: window, SelfUp: selfUp, Checks: checks})
	if len(res.Dropped) > 0 && s.killed != nil && s.detect == 0 && slices.Contains(res.Dropped, s.killed.id) {
		s.detect = s.eng.now
	}
	pending := len(res.Pulls) + 1
	finish := func() {
		if pending--; pending == 0 {
			s.endRound(h)
		}
	}
	for _, t := range res.Pulls {
		b := s.byHost[t]
		serve := func(reply func(int, any)) {
			// The puller's endpoint is learned, and the server's next
			// round comes at the refresh interval (serveRoster).
			if added, _, _ := b.mon.Learn([]string{h.host}, nil); len(added) > 0 {
				s.kick(b)
			}
			s.kick(b)
			r := roster{live: append(b.mon.Live(), revoke.RosterEntry[simInfo]{ID: b.id, Host: b.host}), dead: b.mon.Dead()}
			reply(rosterHeaderBytes+rosterEntryBytes*len(r.live)+rosterDeadBytes*len(r.dead), r)
		}
		s.call(h, b, pullRequestBytes, s.c.Timeout, serve, func(v any, ok, _ bool) {
			if ok {
				r := v.(roster)
				hosts := make([]string, len(r.live))
				for i, e := range r.live {
					hosts[i] = e.Host
				}
				if added, _, _ := h.mon.Learn(hosts, nil); len(added) > 0 {
					s.kick(h)
				}
				mWatchDriver.step(s, h, h.mon, memberwatch.Merge[simInfo]{Live: r.live, Dead: r.dead})
			}
			finish()
		})
	}
	finish()
}

// endRound publishes h's topology and paces its next round.
func (s *msim) endRound(h *mHost) {
	h.inRound = false
	d := h.mon.Digest()
	changed := d != h.digest || h.mon.Missing()
	h.digest = d
	if h.formedRound == 0 && d == s.full {
		h.formedRound, h.formedAt = h.mon.Rounds(), s.eng.now
	}
	if k := s.killed; k != nil && h.knewAt == 0 && !h.mon.Lists(k.id) {
		h.knewAt, h.knewRound = s.eng.now, h.mon.Rounds()
	}
	// A member that leaves this topology is spread as failed (the
	// members actor's memberGone); a member that is told kicks its
	// provider.
	for _, o := range s.hosts {
		if !changed || o == h || !h.mon.IsDead(o.id) {
			continue
		}
		if o.alive && s.expelAt == 0 {
			s.expelAt = s.eng.now
			s.violate("%s dropped %s, which is running", h.id, o.id)
		}
		n := revoke.FailureNotice(o.id, o.host)
		if !s.c.NoNotices && !h.bc.Seen(n.ID()) {
			s.decide(mNotice{h: h, n: n}, revoke.Originate{Notice: n})
		}
	}
	next := h.pace.Next(changed)
	if h.kicked {
		h.kicked, next = false, 0
	}
	s.schedule(h, s.eng.now+next)
}

// compareViews is the members actor's comparison of views
// (internal/member/member_actor.go): a hello carrying the digest of h's view to
// each of its binomial-graph neighbours among the members it lists, each
// answered without the view when the neighbour's digest is the same;
// again after viewCheckQuiet if every answer agreed and the view is
// what was compared, else after viewCheckInterval.
func (s *msim) compareViews(h *mHost) {
	d := h.mon.Digest()
	next := viewCheckInterval
	if h.viewAgreed && d == h.viewSent {
		next = viewCheckQuiet
	}
	h.viewSent, h.viewAgreed = d, true
	live := []string{h.id}
	for _, e := range h.mon.Live() {
		live = append(live, e.ID)
	}
	slices.Sort(live)
	if o, err := revoke.NewOverlay(live, h.id); err == nil {
		for _, id := range o.Neighbors() {
			b := s.byID[id]
			if b == nil || b == h {
				continue
			}
			s.call(h, b, helloBytes, time.Second, func(reply func(int, any)) {
				if b.mon.Digest() == d {
					reply(helloAnswerBytes, true)
					return
				}
				reply(helloAnswerBytes+viewEntryBytes*(len(b.mon.Live())+1), false)
			}, func(v any, ok, _ bool) {
				if same, _ := v.(bool); !ok || !same {
					h.viewAgreed = false
				}
			})
		}
	}
	s.on(h, s.eng.now+next, func() { s.compareViews(h) })
}

// now is the membership simulation's time, as its cores take it.
func (s *msim) now() time.Time { return wall(s.eng.now) }

// mWatchDriver steps a member's watch (the simulator's one driver): the
// simulation checks and pulls itself, so its Box holds nothing.
var mWatchDriver = &driver[*msim, *mHost, memberwatch.Event[simInfo], memberwatch.Output]{
	send: func(s *msim, h *mHost, snd outbox.Send) { s.violate("%s's membership watch sent %T", h.id, snd.Msg) },
}

// mNotice is a notice's step at one member.
type mNotice struct {
	h *mHost
	n revoke.Notice
}

// mRevokeDriver carries out a failure broadcaster's decision (the
// simulator's one driver): each copy goes to the overlay neighbour it
// names, if running, and is a Received step there when it arrives.
// (Set in init: its sends step the broadcasters it drives.)
var mRevokeDriver *driver[*msim, mNotice, revoke.Event, revoke.Decision]

func init() {
	mRevokeDriver = &driver[*msim, mNotice, revoke.Event, revoke.Decision]{
		send: func(s *msim, at mNotice, snd outbox.Send) {
			h, n := at.h, at.n
			to := s.byID[snd.To.(string)]
			if to == nil || !to.alive {
				return
			}
			h.msgs++
			s.msgs++
			from := h.id
			sent := s.work(h, s.c.MsgCost)
			s.eng.at(sent+s.c.Latency, func() {
				s.on(to, s.work(to, s.c.MsgCost), func() { s.decide(mNotice{h: to, n: n}, revoke.Received{From: from, Notice: n}) })
			})
		},
	}
}

// decide steps the failure broadcaster at at.h: the copies go to its
// overlay neighbours, and a delivery kicks h's provider.
func (s *msim) decide(at mNotice, ev revoke.Event) {
	if mRevokeDriver.step(s, at, at.h.bc, ev).Deliver {
		s.kick(at.h)
	}
}
