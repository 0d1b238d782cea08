package member

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"syscall"

	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/memberwatch"
	"github.com/hoplite-go/hoplite/internal/revoke"
)

// How the automanaged members watch each other at scale: the decisions
// are internal/memberwatch's (whom to check, what a digest that differs
// does, when a miss counts, how rosters merge); here are the endpoints
// that carry them. Every /_health answer carries a digest of the
// answerer's roster, and a checker whose own differs pulls the roster
// (rosterPath) and merges it. A monitor that misses a check asks
// indirectProbes other members to check the endpoint for it (probePath)
// before counting the miss, as SWIM does: a member one monitor cannot
// reach while others can (a broken link, a refused connection on one
// path) is not expelled.

const (
	// rosterPath serves this member's roster (rosterAnswer).
	rosterPath = "/_hoplite/members"
	// probePath checks an endpoint this member knows for another member
	// (?host=host:port) and answers its /_health answer.
	probePath = "/_hoplite/probe"
	// indirectProbes is how many other members a monitor asks to check
	// an endpoint it missed.
	indirectProbes = memberwatch.DefaultIndirectProbes
	// maxRosterMembers bounds the live members a roster holds (and a
	// pulled roster may name), maxRosterDead the dead ids it remembers.
	maxRosterMembers = memberwatch.DefaultMaxLive
	maxRosterDead    = memberwatch.DefaultMaxDead
	// probeRate and probeBurst bound the indirect probes one source may
	// ask of this member: a monitor asks at most indirectProbes per
	// endpoint it missed per round.
	probeRate  = 50
	probeBurst = 100
	// maxRosterAnswer bounds a pulled roster's body.
	maxRosterAnswer = 4 << 20
)

// rosterAnswer is a member's roster as rosterPath serves it.
type rosterAnswer struct {
	Cluster string         `json:"cluster"`
	Members []rosterMember `json:"members"`
	Dead    []string       `json:"dead"`
}

// rosterPull is the body of a roster pull: the puller's cluster and its
// own endpoint ("" if it has none to announce).
type rosterPull struct {
	Cluster string `json:"cluster"`
	Host    string `json:"host,omitempty"`
}

// rosterMember is one live member in a rosterAnswer: its /_health
// answer and the endpoint its monitors check.
type rosterMember struct {
	seedNode
	Host string `json:"host"`
}

// serveRoster adds the roster and indirect probe endpoints to the
// manage port's server.
func (p *seedProvider) serveRoster(e *echo.Echo) {
	limit := newRateLimiter(probeRate, probeBurst)
	e.POST(rosterPath, func(c echo.Context) error {
		var in rosterPull
		if err := json.NewDecoder(http.MaxBytesReader(c.Response(), c.Request().Body, 4<<10)).Decode(&in); err != nil {
			return c.String(http.StatusBadRequest, "bad roster pull: "+err.Error())
		}
		if in.Cluster != p.cluster {
			return c.String(http.StatusConflict, "cluster "+p.cluster+", not "+in.Cluster)
		}
		if in.Host != "" && validSeed(in.Host) == nil {
			// The puller's endpoint, as a seed: checked like any other
			// (a joiner that reached one member is found by all).
			p.learn([]string{in.Host})
		}
		// The puller's roster differs from this one: this member's next
		// round comes at the refresh interval, not a quiet one later.
		p.pace.Kick()
		return c.JSON(http.StatusOK, p.rosterAnswer())
	})
	e.GET(probePath, func(c echo.Context) error {
		src := netip.Addr{}
		if ap, err := netip.ParseAddrPort(c.Request().RemoteAddr); err == nil {
			src = ap.Addr().Unmap()
		}
		if !limit.allow(src) {
			return c.String(http.StatusTooManyRequests, "too many probes")
		}
		host := c.QueryParam("host")
		if !p.knownHost(host) {
			// Only endpoints of this cluster: the port is no way to make a
			// member connect anywhere.
			return c.String(http.StatusNotFound, "not a known member endpoint")
		}
		n, err := p.check(c.Request().Context(), host)
		if err != nil {
			return c.String(http.StatusGatewayTimeout, err.Error())
		}
		return c.JSON(http.StatusOK, n)
	})
}

// knownHost: host is an endpoint this member checks or a live member's.
func (p *seedProvider) knownHost(host string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.Known(host)
}

// rosterAnswer is this member's roster, itself included.
func (p *seedProvider) rosterAnswer() rosterAnswer {
	out := rosterAnswer{Cluster: p.cluster}
	if self := p.self.Load(); self != nil && p.selfHost != "" {
		out.Members = append(out.Members, rosterMember{seedNode: *self, Host: p.selfHost})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.mon.Live() {
		out.Members = append(out.Members, rosterMember{seedNode: e.Info, Host: e.Host})
	}
	out.Dead = p.mon.Dead()
	return out
}

// view is this member's roster digest, as /_health carries it.
func (p *seedProvider) view() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return memberwatch.DigestString(p.mon.Digest())
}

// pull fetches host's roster and merges it; it reports whether this
// member's live set changed. The endpoints it names are learned, so
// that the overlay spans them.
func (p *seedProvider) pull(ctx context.Context, host string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, p.checkTimeout())
	defer cancel()
	body, _ := json.Marshal(rosterPull{Cluster: p.cluster, Host: p.selfHost})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.scheme+"://"+host+rosterPath, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	answer := io.LimitReader(resp.Body, maxRosterAnswer)
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, answer)
		return false, fmt.Errorf("roster of %s: %s", host, resp.Status)
	}
	data, err := io.ReadAll(answer)
	if err != nil {
		return false, err
	}
	live, dead, err := decodeRoster(data, p.cluster)
	if err != nil {
		return false, fmt.Errorf("roster of %s: %w", host, err)
	}
	hosts := make([]string, 0, len(live))
	for _, e := range live {
		hosts = append(hosts, e.Host)
	}
	p.learn(hosts)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mon.Step(p.now(), memberwatch.Merge[seedNode]{Live: live, Dead: dead}).Changed, nil
}

// decodeRoster reads a peer's rosterAnswer for cluster: entries that are
// not a member's (no id, a port out of range, an endpoint that is not
// host:port) are dropped, and at most maxRosterMembers live members and
// maxRosterDead dead ids are taken.
func decodeRoster(data []byte, cluster string) ([]revoke.RosterEntry[seedNode], []string, error) {
	var in rosterAnswer
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, nil, err
	}
	if in.Cluster != cluster {
		return nil, nil, fmt.Errorf("cluster %q, not %q", in.Cluster, cluster)
	}
	var live []revoke.RosterEntry[seedNode]
	for _, m := range in.Members {
		if len(live) >= maxRosterMembers {
			break
		}
		if m.ID == "" || len(m.ID) > 300 || m.Port <= 0 || m.Port > 65535 || m.ClusterName != cluster || validSeed(m.Host) != nil {
			continue
		}
		m.View = ""
		live = append(live, revoke.RosterEntry[seedNode]{ID: m.ID, Host: m.Host, Info: m.seedNode})
	}
	var dead []string
	for _, id := range in.Dead {
		if len(dead) >= maxRosterDead {
			break
		}
		if id != "" && len(id) <= 300 {
			dead = append(dead, id)
		}
	}
	return live, dead, nil
}

// indirect asks up to indirectProbes live members (not self, not the
// target) to check host, expected to answer as member id; it returns the
// first answer that names id, or nil.
func (p *seedProvider) indirect(ctx context.Context, host, id string) *seedNode {
	p.mu.Lock()
	via := p.mon.Helpers(host, id, rand.Shuffle)
	p.mu.Unlock()
	if len(via) == 0 {
		return nil
	}
	// The helpers check within their own timeout: wait for that and the
	// way there and back.
	ctx, cancel := context.WithTimeout(ctx, 2*p.checkTimeout())
	defer cancel()
	answers := make(chan *seedNode, len(via))
	var wg sync.WaitGroup
	for _, h := range via {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := p.probeVia(ctx, h, host)
			if err == nil && n.ID == id {
				answers <- n
			}
		}()
	}
	go func() { wg.Wait(); close(answers) }()
	n, ok := <-answers
	if !ok {
		return nil
	}
	cancel() // the others need not finish
	return n
}

// probeVia asks the member at via to check host.
func (p *seedProvider) probeVia(ctx context.Context, via, host string) (*seedNode, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		p.scheme+"://"+via+probePath+"?host="+url.QueryEscape(host), nil)
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

// refused: the check's connection was refused (nothing listens there).
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// logIndirect notes a miss that another member's check made good.
func (p *seedProvider) logIndirect(host, id string, err error) {
	p.log.WithError(err).WithFields(logrus.Fields{"member": id, "host": host}).
		Debug("health check missed, but another member reached it: not a miss")
}
