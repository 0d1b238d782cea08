package member

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/transport"
)

// Seed exchange for the automanaged provider. Its membership is the seeds
// that answer its health polls, so members configured with different seed
// lists saw different clusters: README's Join example (a new member whose
// seeds are one member and itself) saw two members while the others saw
// three, and nothing converged. Members therefore tell each other the
// seeds they know: every refresh interval a member posts its list to one
// seed chosen at random, which adds the ones it lacks and answers with
// its own list, which the poster adds. Every member then polls the union
// of all the seed lists: one seed that reaches the cluster is enough.
// Once an exchange teaches a member nothing, it waits twice as long
// before the next, up to quietFactor refresh intervals; a seed learned
// either way brings it back to the refresh interval (and starts a poll).
//
// A member posts a digest of its list (seedDigest), not the list: once
// the cluster has formed every member's list is the same, and a whole
// list each way, O(N) bytes every few seconds, was most of what an idle
// member of a large cluster sent. A seed whose own list has the same
// digest answers Same and nothing else; one whose list differs answers
// its list, and the poster posts its own in turn if the answer lacks
// any of its seeds. A poster of a list (an older member, or the second
// step) is answered with the list, as before digests.

// seedsPath is the seed exchange endpoint on a member's manage port.
const seedsPath = "/_hoplite/seeds"

// seedExchange is the body of a seed exchange, both ways.
type seedExchange struct {
	Cluster string   `json:"cluster"`
	Seeds   []string `json:"seeds,omitempty"`
	// Digest, posted in place of Seeds, is the poster's seedDigest.
	Digest string `json:"digest,omitempty"`
	// Same answers a Digest equal to the answerer's own (without Seeds).
	Same bool `json:"same,omitempty"`
}

// seedDigest is a digest of the seed list seeds, whatever its order.
func seedDigest(seeds []string) string {
	s := slices.Clone(seeds)
	slices.Sort(s)
	h := fnv.New64a()
	for _, x := range slices.Compact(s) {
		h.Write([]byte(x))
		h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 36)
}

// exchangeRate and exchangeBurst bound the seed exchanges one source
// may post: a member posts one per refresh interval at most (5 a second
// at the default 200 ms) to a seed chosen at random, so members sharing
// a host stay below it, while a poster in a loop costs this member at
// most exchangeRate decodes of up to 1 MiB a second.
const (
	exchangeRate  = 20
	exchangeBurst = 40
)

// serveSeeds answers seed exchanges on the manage port's HTTP server.
func (m *Member) serveSeeds(e *echo.Echo, p *seedProvider) {
	limit := newRateLimiter(exchangeRate, exchangeBurst)
	m.serveSeedsLimited(e, p, limit)
}

func (m *Member) serveSeedsLimited(e *echo.Echo, p *seedProvider, limit *rateLimiter) {
	e.POST(seedsPath, func(c echo.Context) error {
		src := netip.Addr{}
		if ap, err := netip.ParseAddrPort(c.Request().RemoteAddr); err == nil {
			src = ap.Addr().Unmap()
		}
		if !limit.allow(src) {
			p.metrics.refuse(refusedExchange)
			if ok, n := p.warn.allow("exchange rate " + src.String()); ok {
				m.log.WithFields(logrus.Fields{"source": src.String(), "suppressed": n}).
					Warn("seed exchange: refused a post over its source's rate")
			}
			return c.String(http.StatusTooManyRequests, "too many seed exchanges")
		}
		var in seedExchange
		if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 1<<20)).Decode(&in); err != nil {
			return c.String(http.StatusBadRequest, "bad seed exchange: "+err.Error())
		}
		if in.Cluster != m.cfg.ClusterName {
			// Another cluster: keep the lists apart.
			return c.String(http.StatusConflict, "cluster "+m.cfg.ClusterName+", not "+in.Cluster)
		}
		m.learnSeeds(p, in.Seeds, "posted from "+src.String())
		mine := p.Gossip()
		if in.Digest != "" && in.Digest == seedDigest(mine) {
			return c.JSON(http.StatusOK, seedExchange{Cluster: m.cfg.ClusterName, Same: true})
		}
		return c.JSON(http.StatusOK, seedExchange{Cluster: m.cfg.ClusterName, Seeds: mine})
	})
}

// learnSeeds adds seeds to the provider's polled hosts, logging the new
// ones, and reports whether there were any. Seeds it refuses (not
// host:port, or past maxLearnedSeeds) are counted and logged at warn,
// one line per how (a peer, or the exchange's endpoint) per
// refusalLogEvery.
func (m *Member) learnSeeds(p *seedProvider, seeds []string, how string) bool {
	added, invalid, full := p.learn(seeds)
	p.metrics.seedsRefused("invalid", invalid)
	p.metrics.seedsRefused("full", full)
	if invalid+full > 0 {
		if ok, n := p.warn.allow("seeds " + how); ok {
			m.log.WithFields(logrus.Fields{"invalid": invalid, "full": full, "max_learned": p.maxLearned, "suppressed": n}).
				Warn("refused seeds " + how + ": not host:port, or this member polls as many learned seeds as it may")
		}
	}
	if len(added) > 0 {
		slices.Sort(added)
		m.log.WithField("seeds", added).Info("learned seeds " + how)
		return true
	}
	return false
}

// kickMembership polls the seeds now, and at the refresh interval until
// the topology settles again: this member heard of a leave or a failure
// that the health checks are about to show.
func (m *Member) kickMembership() {
	if m.automanaged != nil {
		m.automanaged.Kick()
	}
}

// exchangeSeeds runs the seed exchange until the member stops.
func (m *Member) exchangeSeeds(p *seedProvider, self string) {
	// The manage port speaks mutual TLS when the member does: present
	// this member's certificate, as the health checks do.
	// Its connections close once idle as the health checks' do: an
	// exchange goes to a seed chosen at random, and kept for longer a
	// member would hold one to every seed.
	tr := &http.Transport{TLSClientConfig: m.cfg.tls, TLSHandshakeTimeout: time.Second,
		DialContext:     (&net.Dialer{KeepAliveConfig: transport.KeepAlive}).DialContext,
		IdleConnTimeout: healthIdleTimeout(m.cfg.RefreshInterval)}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Second}
	scheme := "http"
	if m.cfg.tls != nil {
		scheme = "https"
	}
	wait := m.cfg.RefreshInterval
	for {
		if !p.exchange.Wait(m.quit, wait) {
			return
		}
		hosts := exchangePeers(p, self)
		if len(hosts) == 0 {
			wait = p.exchange.Next(false)
			continue
		}
		peer := hosts[rand.IntN(len(hosts))]
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		learned, err := m.exchangeWith(ctx, p, client, scheme, peer)
		cancel()
		// Not up, gone, or another cluster (err): its health poll says
		// which, and the next round asks another.
		wait = p.exchange.Next(err == nil && learned)
	}
}

// exchangeWith makes one seed exchange with peer: the digest of this
// member's list, then, if the peer's answer is its own list and lacks
// some of this member's seeds, this member's list. It reports whether
// this member learned seeds.
func (m *Member) exchangeWith(ctx context.Context, p *seedProvider, client *http.Client, scheme, peer string) (bool, error) {
	mine := p.Gossip()
	ans, err := postSeeds(ctx, client, scheme, peer, seedExchange{Cluster: m.cfg.ClusterName, Digest: seedDigest(mine)})
	if err != nil || ans.Same {
		return false, err
	}
	learned := m.learnSeeds(p, ans.Seeds, "from "+peer)
	if slices.ContainsFunc(mine, func(s string) bool { return !slices.Contains(ans.Seeds, s) }) {
		_, err = postSeeds(ctx, client, scheme, peer, seedExchange{Cluster: m.cfg.ClusterName, Seeds: mine})
	}
	return learned, err
}

// exchangePeers are the seeds an exchange may go to: those known to
// answer (Gossip), not this member. A made-up seed posted to this member
// would cost an exchange's timeout each time it was chosen.
func exchangePeers(p *seedProvider, self string) []string {
	return slices.DeleteFunc(p.Gossip(), func(h string) bool { return h == self })
}

// postSeeds posts out to peer's seed exchange endpoint and returns the
// answer.
func postSeeds(ctx context.Context, client *http.Client, scheme, peer string, out seedExchange) (seedExchange, error) {
	body, _ := json.Marshal(out)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+"://"+peer+seedsPath, bytes.NewReader(body))
	if err != nil {
		return seedExchange{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return seedExchange{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return seedExchange{}, fmt.Errorf("seed exchange with %s: %s", peer, resp.Status)
	}
	var in seedExchange
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&in); err != nil {
		return seedExchange{}, fmt.Errorf("seed exchange with %s: %w", peer, err)
	}
	return in, nil
}
