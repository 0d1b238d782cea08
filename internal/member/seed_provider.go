package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/memberwatch"
	"github.com/hoplite-go/hoplite/internal/transport"
)

// The seeds a member learned from the seed exchange, unlike those it was
// given (never forgotten, never bounded: the operator's list), are
// anyone's word: the exchange endpoint takes any poster's list. Learned
// seeds are therefore validated (host:port), bounded and forgotten once
// they stop answering, so a poster of 1,024 made-up seeds costs the
// cluster a bounded, temporary amount of polling. A member that comes
// back after its seed was forgotten is learned again: it posts its own
// seeds to one of them.
const (
	// maxLearnedSeeds bounds the learned seeds a member knows at once;
	// new ones beyond it are refused until some are forgotten. A cluster
	// of a few thousand members fits.
	maxLearnedSeeds = memberwatch.DefaultMaxLearned
	// learnedSeedTTL and learnedSeedMisses: a learned seed is forgotten
	// once it has not answered (for this cluster) for learnedSeedTTL and
	// missed at least learnedSeedMisses checks in a row since.
	learnedSeedTTL    = memberwatch.DefaultLearnedTTL
	learnedSeedMisses = memberwatch.DefaultLearnedMisses
)

// seedProvider is Hoplite's automanaged membership provider. Every member
// serves /_health on its manage port, naming itself, and each refresh
// interval (up to quietFactor of them while nothing changes) checks the
// /_health of its neighbours among the seeds it knows, learning the
// rest of the cluster from them (seed_roster.go); the topology is its
// roster. What it decides (whom to check, what a miss counts for, whose
// roster to pull) is the pure core internal/memberwatch, which the
// simulator steps too; this shell does the HTTP around it. It replaces Proto.Actor's automanaged
// provider, which
//   - polls a host list fixed at construction, so members given different
//     seeds saw different clusters for good (here the list grows:
//     AddHosts, fed by the seed exchange of seeds.go);
//   - drops a member after one check slower than 2 s, and Proto.Actor
//     then blocks its id for good, so a member paused for a moment on a
//     loaded host was expelled (here a member leaves the topology only
//     after misses checks in a row, or at once when its port refuses the
//     connection: nothing listens, the process is gone);
//   - says nothing of why a member left (HealthError does);
//   - only speaks plain HTTP (here HTTPS with this member's client
//     certificate when the cluster runs mutual TLS);
//   - keeps its state in package variables shared by every provider of
//     the process, and its poll outlives Shutdown by a refresh interval.
//
// A member that answers for another cluster's name is not in the
// topology. When no host answers at all, not even this member's own
// port, the topology is left as it was: an empty one would declare every
// member failed, and this member is stopping or its host is starved.
type seedProvider struct {
	cluster    string
	managePort int
	timeout    time.Duration
	stretch    func(time.Duration) time.Duration // nil: fixed
	scheme     string                            // "https" with mutual TLS
	tr         *http.Transport
	client     *http.Client
	server     *echo.Echo // the manage port's: StartMember starts it, Shutdown closes it
	log        *logrus.Entry

	ctx    context.Context // the poll's lifetime
	cancel context.CancelFunc
	loops  sync.WaitGroup // the poll and the server
	stop   sync.Once

	// self is what /_health answers: nil (503) until StartMember.
	self    atomic.Pointer[seedNode]
	publish func([]*pcluster.Member)

	// mu guards mon, the membership core: the endpoints known, what
	// the checks saw of each, the roster.
	mu         sync.Mutex
	mon        *memberwatch.Monitor[seedNode]
	maxLearned int // mon's bound, for the refusals' log
	now        func() time.Time
	metrics    *manageMetrics // nil: not counted
	warn       *logLimiter    // spaces the warnings about refused seeds

	// pace spaces the polls: refresh while the topology changes, up to
	// quietFactor times that while it does not (Kick: at once).
	pace *quietPace
	// exchange spaces the member's seed exchanges (seeds.go) alike.
	exchange *quietPace

	// selfHost is this member's endpoint among the seeds ("" before
	// start): its place in the monitoring overlay.
	selfHost string
}

// seedProviderConfig configures a seedProvider.
type seedProviderConfig struct {
	Cluster    string        // members answering for another name are ignored
	ManagePort int           // this member's, in its /_health answer
	Seeds      []string      // host:manage-port to poll, this member's own included
	Refresh    time.Duration // pause between two polls
	Timeout    time.Duration // bound on each health check
	Misses     int           // checks in a row a member may miss and stay (at least 1)
	// Stretch lengthens Timeout by the process's recent scheduling delay
	// (internal/lag): a member that answers late because this one, or the
	// machine, is busy is not a member that failed. Nil keeps it fixed.
	Stretch func(time.Duration) time.Duration
	TLS     *tls.Config // mutual TLS: this member's certificate and the cluster's CA; nil is plain HTTP
	Log     *logrus.Entry
	// MaxLearned, LearnedTTL and LearnedMisses bound the learned seeds
	// (zero: maxLearnedSeeds, learnedSeedTTL, learnedSeedMisses).
	MaxLearned    int
	LearnedTTL    time.Duration
	LearnedMisses int
	Metrics       *manageMetrics // counts refused and forgotten seeds; nil: not counted
	// NoPull keeps the roster to what this member's own checks see: no
	// roster is pulled (tests of members that learn nothing from each
	// other).
	NoPull bool
}

// seedNode is a member's /_health answer (the JSON of Proto.Actor's
// automanaged NodeModel).
type seedNode struct {
	ID             string   `json:"id"`
	Address        string   `json:"address"`
	AutoManagePort int      `json:"auto_manage_port"`
	Port           int      `json:"port"`
	Kinds          []string `json:"kinds"`
	ClusterName    string   `json:"cluster_name"`
	// View is the digest of the answerer's roster (digestString): a
	// checker whose own differs pulls the roster.
	View string `json:"view,omitempty"`
}

// healthIdleTimeout is how long a health check's connection stays open
// unused: twice the longest pause between two rounds (QuietFactor
// refresh intervals), so that the neighbours a member checks every round
// keep theirs, while one to an endpoint checked only in its rotation
// closes. Kept for longer, a member would hold a connection to every
// member it ever checked, O(N) of them, each costing packets while idle.
func healthIdleTimeout(refresh time.Duration) time.Duration {
	return max(2*memberwatch.QuietFactor*refresh, time.Second)
}

// newSeedProvider returns the provider of a member whose manage port
// server is server (listening, not serving yet); it adds /_health to it.
func newSeedProvider(server *echo.Echo, cfg seedProviderConfig) *seedProvider {
	tr := &http.Transport{
		// Members dial each other directly, never through a proxy.
		// Each check's context bounds its dial, handshake and answer
		// together (check): fixed timeouts here would not stretch.
		DialContext:     (&net.Dialer{KeepAliveConfig: transport.KeepAlive}).DialContext,
		TLSClientConfig: cfg.TLS, // ServerName is set per host by the transport
		// One connection per member, kept between polls (a TLS handshake
		// every refresh interval would cost more than the check), but not
		// much longer (healthIdleTimeout).
		MaxIdleConnsPerHost: 2,
		MaxConnsPerHost:     4,
		IdleConnTimeout:     healthIdleTimeout(cfg.Refresh),
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	ctx, cancel := context.WithCancel(context.Background())
	mon := memberwatch.New[seedNode](memberwatch.Config{Misses: cfg.Misses, MaxLearned: cfg.MaxLearned,
		LearnedTTL: cfg.LearnedTTL, LearnedMisses: cfg.LearnedMisses, NoPull: cfg.NoPull}, cfg.Seeds)
	p := &seedProvider{
		cluster: cfg.Cluster, managePort: cfg.ManagePort, timeout: cfg.Timeout, stretch: cfg.Stretch,
		scheme: scheme, tr: tr, client: &http.Client{Transport: tr},
		server: server, log: cfg.Log,
		ctx: ctx, cancel: cancel,
		pace:     newQuietPace(cfg.Refresh),
		exchange: newQuietPace(cfg.Refresh),
		mon:      mon, maxLearned: mon.Config().MaxLearned,
		now: time.Now, metrics: cfg.Metrics, warn: newLogLimiter(refusalLogEvery),
	}
	server.GET("/_health", func(c echo.Context) error {
		n := p.self.Load()
		if n == nil {
			return c.String(http.StatusServiceUnavailable, "starting")
		}
		answer := *n
		answer.View = p.view()
		return c.JSON(http.StatusOK, answer)
	})
	p.serveRoster(server)
	return p
}

// StartMember starts serving /_health and polling the seeds. The first
// topology is published once the first poll is done; Proto.Actor's
// cluster.Join waits for it.
func (p *seedProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("automanaged provider: %w", err)
	}
	p.start(&seedNode{ID: c.ActorSystem.ID, Address: host, Port: port, AutoManagePort: p.managePort,
		Kinds: c.GetClusterKinds(), ClusterName: p.cluster}, func(ms []*pcluster.Member) { c.MemberList.UpdateClusterTopology(ms) })
	return nil
}

// start serves /_health as self and polls, handing each topology to
// publish.
func (p *seedProvider) start(self *seedNode, publish func([]*pcluster.Member)) {
	p.selfHost = net.JoinHostPort(self.Address, strconv.Itoa(self.AutoManagePort))
	p.mu.Lock()
	p.mon.Start(p.selfHost, self.ID)
	p.mu.Unlock()
	p.self.Store(self)
	p.publish = publish
	p.loops.Add(2)
	go func() {
		defer p.loops.Done()
		if err := p.server.StartServer(p.server.Server); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.log.WithError(err).Warn("the manage port stopped serving: the other members will drop this one")
		}
	}()
	go p.poll()
}

// StartClient is not supported: Hoplite's clients are members.
func (p *seedProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("automanaged provider: clients are not supported")
}

// Shutdown closes the manage port's server (the other members' checks
// are refused: they drop this member at once) and stops the poll,
// cutting its checks short. graceful changes nothing: the closed port
// is the goodbye.
func (p *seedProvider) Shutdown(graceful bool) error {
	p.stop.Do(func() {
		_ = p.server.Close()
		p.cancel()
		p.loops.Wait()
		p.tr.CloseIdleConnections()
	})
	return nil
}

// AddHosts learns host:port endpoints (validSeed) and returns those
// that were new.
func (p *seedProvider) AddHosts(hosts ...string) []string {
	added, _, _ := p.learn(hosts)
	return added
}

// learn adds the valid hosts it does not know as learned seeds, up to
// maxLearned of them, and returns those it added and how many it refused
// as invalid and for lack of room.
func (p *seedProvider) learn(hosts []string) (added []string, invalid, full int) {
	p.mu.Lock()
	added, invalid, full = p.mon.Learn(hosts, validSeed)
	p.mu.Unlock()
	if len(added) > 0 && p.pace != nil {
		p.pace.Kick()
		p.exchange.Kick()
	}
	return added, invalid, full
}

// validSeed: s is host:port, the host an IP address or a DNS name, the
// port a number in 1..65535: what a member's manage port can be.
func validSeed(s string) error {
	if len(s) > 300 {
		return errors.New("longer than 300 bytes")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("port %q is not in 1..65535", port)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.IsUnspecified() || a.IsMulticast() {
			return fmt.Errorf("address %s is not a member's", host)
		}
		return nil
	}
	if !dnsName(host) {
		return fmt.Errorf("host %q is neither an IP address nor a DNS name", host)
	}
	return nil
}

// dnsName: s is a DNS name (RFC 1123 labels; underscores allowed, as
// some service names have them).
func dnsName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Gossip is the seeds this member passes on in the seed exchange: those
// it was given, and the learned ones that answered a health check for
// this cluster. A made-up seed posted to one member stays with it until
// it is forgotten.
func (p *seedProvider) Gossip() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.Gossip()
}

// forgotten logs and counts the learned hosts the core forgot.
func (p *seedProvider) forgotten(gone []string) {
	if len(gone) == 0 {
		return
	}
	p.metrics.seedsForgotten(len(gone))
	cfg := p.mon.Config()
	p.log.WithFields(logrus.Fields{"seeds": len(gone), "ttl": cfg.LearnedTTL, "misses": cfg.LearnedMisses}).
		Info("forgot learned seeds that have not answered a health check for long")
}

// Hosts are the endpoints polled (a copy).
func (p *seedProvider) Hosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.Hosts()
}

// HealthError is why the member id was last missed by a health check, or
// nil: the evidence for a member that left the topology (the members
// actor logs it).
func (p *seedProvider) HealthError(id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.HealthError(id)
}

// poll publishes the topology after every round of checks until
// Shutdown, the next round a refresh interval later while the topology
// changes and up to quietFactor of them later while it stays the same.
func (p *seedProvider) poll() {
	defer p.loops.Done()
	var last []*pcluster.Member
	for {
		members, ok := p.round(p.ctx)
		if ok {
			p.publish(members)
		}
		changed := !ok || !sameMembers(last, members) || p.missing()
		if ok {
			last = members
		}
		if !p.pace.Wait(p.ctx.Done(), p.pace.Next(changed)) {
			return
		}
	}
}

// Kick polls now, and every refresh interval again until the topology
// stays the same: a member heard of a change (a seed, a leave, a
// failure) that the checks will show.
func (p *seedProvider) Kick() { p.pace.Kick() }

// missing reports whether a member of the topology missed its last
// check: its next misses decide whether it stays, so they are not put
// off.
func (p *seedProvider) missing() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.Missing()
}

// sameMembers: a and b name the same members at the same addresses
// (both sorted by id, as round returns them).
func sameMembers(a, b []*pcluster.Member) bool {
	return slices.EqualFunc(a, b, func(x, y *pcluster.Member) bool {
		return x.Id == y.Id && x.Host == y.Host && x.Port == y.Port
	})
}

// round checks this member's monitoring targets once, in parallel (an
// indirect probe for each that missed), pulls the roster of each whose
// digest differs from this member's, and returns the topology: the
// roster and self, sorted by id. ok is false when there is nothing to
// publish (ctx ended, or a provider not started whose targets did not
// answer).
func (p *seedProvider) round(ctx context.Context) (members []*pcluster.Member, ok bool) {
	p.mu.Lock()
	targets := p.mon.Targets()
	p.mu.Unlock()
	checks := make([]memberwatch.Check[seedNode], len(targets))
	var wg sync.WaitGroup
	var selfUp atomic.Bool
	selfUp.Store(true)
	if self := p.self.Load(); self != nil && self.AutoManagePort > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := p.check(ctx, p.selfHost)
			selfUp.Store(err == nil && n.ID == self.ID)
		}()
	}
	for i, h := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := p.check(ctx, h)
			checks[i] = p.checkOf(h, n, err)
			if err == nil || ctx.Err() != nil {
				return
			}
			p.mu.Lock()
			id, indirect := p.mon.Indirect(checks[i])
			p.mu.Unlock()
			if !indirect {
				return
			}
			// A member listed there that this member cannot reach: ask
			// others before counting the miss.
			if n := p.indirect(ctx, h, id); n != nil {
				p.logIndirect(h, id, err)
				checks[i] = p.checkOf(h, n, nil)
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, false // stopping: the checks were cut short, not missed
	}
	// Misses that time out take a check timeout each: the first and the
	// last of misses of them are (misses-1) timeouts apart at least.
	p.mu.Lock()
	window := time.Duration(p.mon.Config().Misses-1) * p.checkTimeout()
	res := p.mon.Step(p.now(), memberwatch.Round[seedNode]{Window: window, SelfUp: selfUp.Load(), Checks: checks})
	for _, c := range checks {
		if miss := p.mon.MissOf(c.Host); !c.Answered && miss != nil {
			p.log.WithError(c.Err).WithFields(logrus.Fields{"host": c.Host, "missed": miss.Missed}).
				Debug("health check missed")
		}
	}
	p.forgotten(res.Forgotten)
	p.mu.Unlock()
	for _, h := range res.Pulls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.pull(ctx, h); err != nil {
				p.log.WithError(err).WithField("host", h).Debug("roster pull failed")
			}
		}()
	}
	wg.Wait()
	// This member is up (it serves /_health) even when nobody answered:
	// the roster is published, and only judged misses shrink it.
	ok = res.Answered || p.self.Load() != nil
	return p.topology(), ok
}

// checkOf is a check's outcome as the core takes it: an answer (its
// roster digest apart from the member's own entry), or why there was
// none.
func (p *seedProvider) checkOf(host string, n *seedNode, err error) memberwatch.Check[seedNode] {
	if err != nil {
		return memberwatch.Check[seedNode]{Host: host, Err: err, Refused: refused(err)}
	}
	info := *n
	info.View = ""
	return memberwatch.Check[seedNode]{Host: host, Answered: true, ID: n.ID, Info: info, Ours: n.ClusterName == p.cluster, View: n.View}
}

// topology is the roster and self, sorted by id.
func (p *seedProvider) topology() []*pcluster.Member {
	var members []*pcluster.Member
	add := func(n *seedNode) {
		members = append(members, &pcluster.Member{Id: n.ID, Host: n.Address, Port: int32(n.Port), Kinds: slices.Clone(n.Kinds)})
	}
	if self := p.self.Load(); self != nil {
		add(self)
	}
	p.mu.Lock()
	for _, e := range p.mon.Live() {
		add(&e.Info)
	}
	p.mu.Unlock()
	slices.SortFunc(members, func(a, b *pcluster.Member) int { return strings.Compare(a.Id, b.Id) })
	return members
}

// checkTimeout is a check's bound: the health check timeout, stretched
// by the process's recent scheduling delay.
func (p *seedProvider) checkTimeout() time.Duration {
	if p.stretch != nil {
		return p.stretch(p.timeout)
	}
	return p.timeout
}

// check asks host for its /_health, within the health check timeout.
func (p *seedProvider) check(ctx context.Context, host string) (*seedNode, error) {
	ctx, cancel := context.WithTimeout(ctx, p.checkTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.scheme+"://"+host+"/_health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return decodeHealth(resp.StatusCode, resp.Status, io.LimitReader(resp.Body, 1<<20))
}

// decodeHealth reads a /_health answer (status and body), reading the
// body to its end so that the connection serves the next check.
func decodeHealth(status int, statusText string, body io.Reader) (*seedNode, error) {
	defer func() { _, _ = io.Copy(io.Discard, body) }()
	if status != http.StatusOK {
		return nil, fmt.Errorf("health status %s", statusText)
	}
	var n seedNode
	if err := json.NewDecoder(body).Decode(&n); err != nil {
		return nil, fmt.Errorf("health answer: %w", err)
	}
	if n.ID == "" {
		return nil, errors.New("health answer names no member")
	}
	// A peer's answer is as hostile as anyone's: its port goes into the
	// topology as an int32.
	if n.Port <= 0 || n.Port > 65535 {
		return nil, fmt.Errorf("health answer: port %d is not in 1..65535", n.Port)
	}
	if len(n.View) > 16 {
		return nil, errors.New("health answer: view digest longer than 16 hex digits")
	}
	return &n, nil
}
