package member

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// seedEndpoint is a member's seed exchange endpoint (serveSeeds) over
// provider p, without the rest of the member.
func seedEndpoint(t testing.TB, p *seedProvider) (*Member, *echo.Echo) {
	t.Helper()
	m := &Member{cfg: MemberConfig{ClusterName: seedTestCluster}, log: logrus.NewEntry(testLogger(t, logrus.InfoLevel))}
	e := echo.New()
	m.serveSeeds(e, p)
	return m, e
}

// postExchange posts body to the seed exchange endpoint e serves.
func postExchange(e *echo.Echo, body []byte) *httptest.ResponseRecorder {
	return postExchangeFrom(e, "127.0.0.2:40000", body)
}

func postExchangeFrom(e *echo.Echo, remote string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, seedsPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.RemoteAddr = remote
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}

// TestValidSeed: a seed is host:port, the host an IP or a DNS name.
func TestValidSeed(t *testing.T) {
	for _, s := range []string{"127.0.0.1:7946", "[::1]:80", "node-3.example.com:7946", "n_1.svc.local.:1", "[fe80::1%eth0]:9", "localhost:65535"} {
		if err := validSeed(s); err != nil {
			t.Errorf("validSeed(%q) = %v, want nil", s, err)
		}
	}
	for _, s := range []string{"", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:http", ":80",
		"http://a:80", "a b:80", "a/b:80", "-a:80", "a..b:80", "0.0.0.0:80", "[::]:80", "224.0.0.1:80", "a:80\n",
		strings.Repeat("a", 64) + ":80", strings.Repeat("a.", 150) + "a:1", "[::1:80", "a:80:90"} {
		if err := validSeed(s); err == nil {
			t.Errorf("validSeed(%q) = nil, want an error", s)
		}
	}
}

// TestSeedExchangeBoundsLearnedSeeds: a poster of 1,024 seeds (and junk)
// adds at most the cap; the refused are counted; configured seeds are
// not in the cap, and junk is never added.
func TestSeedExchangeBoundsLearnedSeeds(t *testing.T) {
	configured := []string{"127.0.0.1:1", "127.0.0.1:2"}
	mm := newManageMetrics()
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Seeds: configured, Refresh: time.Second,
		Timeout: time.Second, MaxLearned: 16, Metrics: mm, Log: logrus.NewEntry(testLogger(t, logrus.InfoLevel))})
	t.Cleanup(func() { _ = p.Shutdown(false) })
	_, e := seedEndpoint(t, p)

	in := seedExchange{Cluster: seedTestCluster}
	for i := range 1024 {
		in.Seeds = append(in.Seeds, fmt.Sprintf("10.%d.%d.1:7946", i/256, i%256))
	}
	in.Seeds = append(in.Seeds, "not a seed", "127.0.0.1:0", configured[0])
	body, _ := json.Marshal(in)
	rec := postExchange(e, body)
	if rec.Code != http.StatusOK {
		t.Fatalf("exchange: %d %s", rec.Code, rec.Body)
	}
	hosts := p.Hosts()
	if len(hosts) != len(configured)+16 {
		t.Fatalf("%d hosts polled after the exchange, want %d configured + 16 learned", len(hosts), len(configured))
	}
	if !slices.Equal(hosts[:2], configured) || !slices.Equal(hosts[2:], in.Seeds[:16]) {
		t.Fatalf("hosts polled: %v", hosts)
	}
	if n := promtest.ToFloat64(mm.seeds.WithLabelValues("full")); n != 1024-16 {
		t.Fatalf("seeds refused full = %v, want %d", n, 1024-16)
	}
	if n := promtest.ToFloat64(mm.seeds.WithLabelValues("invalid")); n != 2 {
		t.Fatalf("seeds refused invalid = %v, want 2", n)
	}
	// The answer passes on only seeds known to answer: the configured.
	var out seedExchange
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Seeds, configured) {
		t.Fatalf("the exchange answered %v, want only the configured %v", out.Seeds, configured)
	}
}

// TestLearnedSeedsForgotten: a learned seed that has not answered for the
// TTL and missed enough checks in a row is forgotten (and counted); one
// that answers stays, a configured one that never answers stays, and
// one that missed the checks but not for the TTL stays. Forgotten, it can
// be learned again. The clock is the provider's own, driven here.
func TestLearnedSeedsForgotten(t *testing.T) {
	alive := newFakeMember(t, "alive", seedTestCluster, nil)
	other := newFakeMember(t, "other", "another-cluster", nil)
	dead, err := testutil.FreeAddr() // nothing listens: each check is refused at once
	if err != nil {
		t.Fatal(err)
	}
	deadConfigured, err := testutil.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	mm := newManageMetrics()
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Seeds: []string{deadConfigured}, Refresh: time.Second,
		Timeout: 5 * time.Second, Misses: 1, LearnedTTL: time.Minute, LearnedMisses: 3, Metrics: mm,
		Log: logrus.NewEntry(testLogger(t, logrus.DebugLevel))})
	t.Cleanup(func() { _ = p.Shutdown(false) })
	now := time.Unix(1000, 0)
	p.now = func() time.Time { return now }
	if added := p.AddHosts(alive.host(), dead, other.host()); len(added) != 3 {
		t.Fatalf("learned %v", added)
	}
	if g := p.Gossip(); !slices.Equal(g, []string{deadConfigured}) {
		t.Fatalf("gossip before any check: %v, want only the configured seed", g)
	}
	for range 5 { // misses enough, but within the TTL
		roundIDs(t, p)
		now = now.Add(time.Second)
	}
	if hosts := p.Hosts(); len(hosts) != 4 {
		t.Fatalf("hosts within the TTL: %v, want all 4", hosts)
	}
	if g := p.Gossip(); !slices.Equal(g, []string{deadConfigured, alive.host()}) {
		t.Fatalf("gossip: %v, want the configured seed and the one that answered", g)
	}
	if peers := exchangePeers(p, deadConfigured); !slices.Equal(peers, []string{alive.host()}) {
		t.Fatalf("exchange peers: %v, want only the learned seed that answered", peers)
	}
	now = now.Add(time.Minute)
	roundIDs(t, p)
	if hosts := p.Hosts(); !slices.Equal(hosts, []string{deadConfigured, alive.host()}) {
		t.Fatalf("hosts past the TTL: %v, want the configured seed and the one that answers", hosts)
	}
	if n := promtest.ToFloat64(mm.forgotten); n != 2 {
		t.Fatalf("forgotten = %v, want 2 (the dead one and the other cluster's)", n)
	}
	if added := p.AddHosts(dead); !slices.Equal(added, []string{dead}) {
		t.Fatalf("a forgotten seed learned again: %v", added)
	}
	// Learned again, it has a new TTL.
	roundIDs(t, p)
	if !slices.Contains(p.Hosts(), dead) {
		t.Fatal("a seed learned again was forgotten at its first miss")
	}
}

// TestSeedExchangeRateLimited: a source posts exchangeBurst exchanges at
// once, then exchangeRate a second (429 past that, counted); another
// source is not held back by it. The limiter's clock is driven here.
func TestSeedExchangeRateLimited(t *testing.T) {
	mm := newManageMetrics()
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Refresh: time.Second,
		Timeout: time.Second, Metrics: mm, Log: logrus.NewEntry(testLogger(t, logrus.InfoLevel))})
	t.Cleanup(func() { _ = p.Shutdown(false) })
	m := &Member{cfg: MemberConfig{ClusterName: seedTestCluster}, log: logrus.NewEntry(testLogger(t, logrus.InfoLevel))}
	e := echo.New()
	limit := newRateLimiter(exchangeRate, exchangeBurst)
	now := time.Unix(1000, 0)
	limit.now = func() time.Time { return now }
	m.serveSeedsLimited(e, p, limit)
	body, _ := json.Marshal(seedExchange{Cluster: seedTestCluster, Seeds: []string{"127.0.0.1:1"}})
	for i := range exchangeBurst {
		if rec := postExchangeFrom(e, "127.0.0.2:1", body); rec.Code != http.StatusOK {
			t.Fatalf("exchange %d of the burst: %d", i, rec.Code)
		}
	}
	if rec := postExchangeFrom(e, "127.0.0.2:1", body); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("an exchange past the burst: %d, want 429", rec.Code)
	}
	if n := promtest.ToFloat64(mm.refused.WithLabelValues(refusedExchange)); n != 1 {
		t.Fatalf("refused seed_exchange_rate = %v, want 1", n)
	}
	if rec := postExchangeFrom(e, "127.0.0.3:1", body); rec.Code != http.StatusOK {
		t.Fatalf("another source's exchange: %d", rec.Code)
	}
	now = now.Add(time.Second)
	for i := range exchangeRate {
		if rec := postExchangeFrom(e, "127.0.0.2:1", body); rec.Code != http.StatusOK {
			t.Fatalf("exchange %d a second later: %d", i, rec.Code)
		}
	}
	if rec := postExchangeFrom(e, "127.0.0.2:1", body); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("an exchange past the rate: %d, want 429", rec.Code)
	}
}
