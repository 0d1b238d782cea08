package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
)

const seedTestCluster = "seedtest"

// Answers of a fakeMember's /_health.
const (
	healthy int32 = iota
	failing       // 503
	hanging       // no answer until the check gives up
	slow          // answers after slowAnswer
)

// slowAnswer is how long a slow fakeMember takes: a member, or a
// machine, that is busy.
const slowAnswer = 300 * time.Millisecond

// fakeMember is a member's /_health on an httptest server at 127.0.0.1,
// whose answer a test switches.
type fakeMember struct {
	srv    *httptest.Server
	mu     sync.Mutex // guards node
	node   seedNode
	mode   atomic.Int32
	checks atomic.Int64 // health checks asked of it
}

func newFakeMember(t *testing.T, id, cluster string, tlsCfg *tls.Config) *fakeMember {
	t.Helper()
	f := &fakeMember{node: seedNode{ID: id, Address: "127.0.0.1", Port: 1, ClusterName: cluster}}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.checks.Add(1)
		switch f.mode.Load() {
		case failing:
			http.Error(w, "not now", http.StatusServiceUnavailable)
		case hanging:
			<-r.Context().Done() // the client gave up
		case slow:
			select {
			case <-time.After(slowAnswer):
				_ = json.NewEncoder(w).Encode(f.answer())
			case <-r.Context().Done():
			}
		default:
			_ = json.NewEncoder(w).Encode(f.answer())
		}
	}))
	if tlsCfg != nil {
		f.srv.TLS = tlsCfg.Clone()
		f.srv.StartTLS()
	} else {
		f.srv.Start()
	}
	t.Cleanup(f.srv.Close)
	return f
}

// answer is its /_health answer.
func (f *fakeMember) answer() seedNode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node
}

// restart makes it answer as a new incarnation, id.
func (f *fakeMember) restart(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node.ID = id
}

func (f *fakeMember) host() string { return f.srv.Listener.Addr().String() }

// testSeedProvider is a provider whose manage port server is not
// started: tests drive its rounds, or start it with a listener.
func testSeedProvider(t *testing.T, misses int, timeout time.Duration, tlsCfg *tls.Config, seeds ...string) *seedProvider {
	t.Helper()
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Seeds: seeds, Refresh: 10 * time.Millisecond,
		Timeout: timeout, Misses: misses, TLS: tlsCfg, Log: logrus.NewEntry(testLogger(t, logrus.DebugLevel))})
	t.Cleanup(func() { _ = p.Shutdown(false) })
	return p
}

func topologyIDs(ms []*pcluster.Member) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Id)
	}
	return out
}

// roundIDs runs one round of health checks and returns the topology's ids.
func roundIDs(t *testing.T, p *seedProvider) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ms, _ := p.round(ctx)
	return topologyIDs(ms)
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: topology %v, want %v", what, got, want)
	}
}

// TestSeedProviderPollsAddedHosts: the provider serves its own /_health,
// polls it and its seeds, and a host added while it runs (the seed
// exchange) is polled from then on; after Shutdown its port is closed and
// nothing more is published.
func TestSeedProviderPollsAddedHosts(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	b := newFakeMember(t, "b", seedTestCluster, nil)
	p := testSeedProvider(t, 3, 2*time.Second, nil, a.host())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.server.Listener = ln
	self := ln.Addr().String()
	if added := p.AddHosts(self); !slices.Equal(added, []string{self}) {
		t.Fatalf("AddHosts(%s) = %v", self, added)
	}

	var stopped atomic.Bool
	topologies := make(chan []string)
	p.start(&seedNode{ID: "self", Address: "127.0.0.1", Port: 2, ClusterName: seedTestCluster}, func(ms []*pcluster.Member) {
		if stopped.Load() {
			t.Error("a topology was published after Shutdown")
		}
		select { // the poll publishes again next round: a reader that is not waiting misses nothing
		case topologies <- topologyIDs(ms):
		default:
		}
	})
	waitFor := func(want ...string) {
		t.Helper()
		deadline := time.NewTimer(10 * time.Second)
		defer deadline.Stop()
		var last []string
		for {
			select {
			case last = <-topologies:
				if slices.Equal(last, want) {
					return
				}
			case <-deadline.C:
				t.Fatalf("no topology %v published (last %v)", want, last)
			}
		}
	}
	waitFor("a", "self")

	if added := p.AddHosts(b.host(), a.host(), ""); !slices.Equal(added, []string{b.host()}) {
		t.Fatalf("AddHosts(b, a, \"\") = %v, want only b's %s", added, b.host())
	}
	waitFor("a", "b", "self")
	if hosts := p.Hosts(); len(hosts) != 3 {
		t.Fatalf("Hosts() = %v, want a's, self's and b's", hosts)
	}

	if err := p.Shutdown(true); err != nil {
		t.Fatal(err)
	}
	stopped.Store(true)
	if c, err := net.Dial("tcp", self); err == nil {
		c.Close()
		t.Fatalf("the provider's port %s still accepts connections after Shutdown", self)
	}
}

// TestSeedProviderPollsLessWhileNothingChanges: once the topology stays
// the same, the polls space out up to quietFactor refresh intervals; a
// member that misses a check brings them back to the refresh interval.
func TestSeedProviderPollsLessWhileNothingChanges(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	// Refresh 10 ms, quiet at 100 ms; a stays in the topology however
	// many checks it misses.
	p := testSeedProvider(t, 1<<20, 2*time.Second, nil, a.host())
	p.start(&seedNode{ID: "self", Address: "127.0.0.1", Port: 2, ClusterName: seedTestCluster}, func([]*pcluster.Member) {})
	wait := p.pace.current
	eventually(t, 10*time.Second, "the polls of an unchanged topology spaced out to quietFactor refresh intervals", func() bool {
		return wait() == quietFactor*10*time.Millisecond
	})
	before := a.checks.Load()
	a.mode.Store(failing) // a miss: the next checks come at the refresh interval
	eventually(t, 10*time.Second, "a missed check brings the polls back to the refresh interval", func() bool {
		return p.HealthError("a") != nil && wait() == 10*time.Millisecond
	})
	eventually(t, 10*time.Second, "a's checks go on while it misses them", func() bool {
		return a.checks.Load() >= before+3 && wait() == 10*time.Millisecond
	})
}

// TestSeedProviderToleratesMisses: a member that misses fewer checks in a
// row than tolerated (an error status, an answer slower than the check's
// timeout) stays in the topology as last seen, and leaves at the last
// tolerated miss; HealthError says why, until it answers again.
func TestSeedProviderToleratesMisses(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	b := newFakeMember(t, "b", seedTestCluster, nil)
	p := testSeedProvider(t, 3, 200*time.Millisecond, nil, a.host(), b.host())
	wantIDs(t, "both healthy", roundIDs(t, p), "a", "b")
	if err := p.HealthError("a"); err != nil {
		t.Fatalf("HealthError(a) = %v for a member that answers", err)
	}

	a.mode.Store(failing)
	wantIDs(t, "a answered 503 once", roundIDs(t, p), "a", "b")
	err := p.HealthError("a")
	if err == nil || !strings.Contains(err.Error(), "1 consecutive failed health checks of "+a.host()) ||
		!strings.Contains(err.Error(), "503") || !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("HealthError(a) = %v, want 1 miss with its 503, UNAVAILABLE", err)
	}

	a.mode.Store(hanging)
	wantIDs(t, "a missed twice", roundIDs(t, p), "a", "b")
	if err := p.HealthError("a"); err == nil || !strings.Contains(err.Error(), "2 consecutive") ||
		!errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("HealthError(a) = %v, want 2 misses, the last a timeout", err)
	}

	wantIDs(t, "a missed three times", roundIDs(t, p), "b")
	if err := p.HealthError("a"); err == nil || !strings.Contains(err.Error(), "3 consecutive") {
		t.Fatalf("HealthError(a) = %v after a left the topology, want its 3 misses", err)
	}
	if err := p.HealthError("b"); err != nil {
		t.Fatalf("HealthError(b) = %v", err)
	}

	// That incarnation is dead for good (it is told to rejoin as a new
	// one); a new incarnation at its endpoint is a member.
	a.mode.Store(healthy)
	wantIDs(t, "the dropped incarnation answers again", roundIDs(t, p), "b")
	if err := p.HealthError("a"); err != nil {
		t.Fatalf("HealthError(a) = %v once it answers again", err)
	}
	a.restart("a2")
	wantIDs(t, "a new incarnation answers at a's endpoint", roundIDs(t, p), "a2", "b")
	// One miss after it came back is one, not four.
	a.mode.Store(failing)
	wantIDs(t, "a2 missed once after its return", roundIDs(t, p), "a2", "b")
}

// TestSeedProviderRefusedDropsAtOnce: a refused connection (nothing
// listens: the process is gone) drops the member on the first miss,
// whatever the tolerance.
func TestSeedProviderRefusedDropsAtOnce(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	b := newFakeMember(t, "b", seedTestCluster, nil)
	p := testSeedProvider(t, 3, 2*time.Second, nil, a.host(), b.host())
	wantIDs(t, "both up", roundIDs(t, p), "a", "b")
	a.srv.Close()
	wantIDs(t, "a's port closed", roundIDs(t, p), "b")
	err := p.HealthError("a")
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "1 consecutive") {
		t.Fatalf("HealthError(a) = %v, want one refused check", err)
	}
}

// TestSeedProviderTopology: a member answering for another cluster is
// not in the topology, and a round in which no host answers publishes
// nothing (an empty topology would fail every member).
func TestSeedProviderTopology(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	x := newFakeMember(t, "x", "another", nil)
	p := testSeedProvider(t, 1, 2*time.Second, nil, a.host(), x.host())
	wantIDs(t, "a and another cluster's x", roundIDs(t, p), "a")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	q := testSeedProvider(t, 1, 2*time.Second, nil, closed)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if ms, ok := q.round(ctx); ok {
		t.Fatalf("a round in which no host answered has a topology to publish: %v", topologyIDs(ms))
	}
}

// TestSeedProviderTLS: with mutual TLS the health checks go over HTTPS
// and present this member's certificate; without one, or in plain HTTP,
// the member is not seen.
func TestSeedProviderTLS(t *testing.T) {
	ca, cert, key, err := GenerateCerts(filepath.Join(t.TempDir(), "cluster"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	a := newFakeMember(t, "a", seedTestCluster, cfg) // requires a client certificate the CA signed

	with := testSeedProvider(t, 1, 2*time.Second, cfg, a.host())
	wantIDs(t, "HTTPS with the member's certificate", roundIDs(t, with), "a")

	noCert := cfg.Clone()
	noCert.Certificates = nil
	without := testSeedProvider(t, 1, 2*time.Second, noCert, a.host())
	wantIDs(t, "HTTPS without a client certificate", roundIDs(t, without))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := without.check(ctx, a.host()); err == nil {
		t.Fatal("a health check without a client certificate succeeded")
	}

	plain := testSeedProvider(t, 1, 2*time.Second, nil, a.host())
	wantIDs(t, "plain HTTP to a TLS member", roundIDs(t, plain))
}

// TestSeedProviderStretchesItsTimeoutOnABusyMachine: a health check
// waits its timeout lengthened by the process's scheduling delay
// (seedProviderConfig.Stretch), so a member that answers late on a busy
// machine is not counted a miss; with the timeout fixed it is.
func TestSeedProviderStretchesItsTimeoutOnABusyMachine(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	// Both first see a answer in time (with a timeout no busy machine
	// misses), then check with 100 ms.
	fixed := testSeedProvider(t, 3, 10*time.Second, nil, a.host())
	stretched := testSeedProvider(t, 3, 10*time.Second, nil, a.host())
	wantIDs(t, "a healthy", roundIDs(t, fixed), "a")
	wantIDs(t, "a healthy", roundIDs(t, stretched), "a")
	fixed.timeout, stretched.timeout = 100*time.Millisecond, 100*time.Millisecond
	stretched.stretch = func(d time.Duration) time.Duration { return d + 5*time.Second } // a busy machine's lag
	a.mode.Store(slow)
	roundIDs(t, fixed)
	if err := fixed.HealthError("a"); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a fixed 100 ms check of a member answering in %v: %v, want a timeout", slowAnswer, err)
	}
	wantIDs(t, "a slow member, the check stretched", roundIDs(t, stretched), "a")
	if err := stretched.HealthError("a"); err != nil {
		t.Fatalf("a stretched check of a member answering in %v: %v, want no miss", slowAnswer, err)
	}
}

// A health check's connection closes once it has stayed unused for
// longer than the longest pause between two rounds: a member does not
// keep one open (and probed by TCP keep-alive) to every member it ever
// checked in its rotation.
func TestHealthConnectionClosesOnceIdle(t *testing.T) {
	closed := make(chan struct{}, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(seedNode{ID: "m", Address: "127.0.0.1", Port: 1, ClusterName: seedTestCluster})
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := testSeedProvider(t, 3, time.Second, nil)
	if got, want := healthIdleTimeout(10*time.Millisecond), time.Second; got != want {
		t.Fatalf("idle timeout at a 10 ms refresh: %v, want %v", got, want)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if n, err := p.check(ctx, srv.Listener.Addr().String()); err != nil || n.ID != "m" {
		t.Fatalf("check: %v, %v", n, err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the check's connection was still open 10 s after it, idle")
	}
}
