package member

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"
)

// rosterProvider is a running automanaged provider on 127.0.0.1 (its
// manage port serving), as a member's.
type rosterProvider struct {
	*seedProvider
	id, host string
}

// listenManage returns a listener on a free loopback port.
func listenManage(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// startRosterProvider starts member id's provider on ln, checking seeds
// (its own endpoint is added), with the given tolerance and timeout.
func startRosterProvider(t *testing.T, id string, ln net.Listener, misses int, timeout time.Duration, noPull bool, seeds ...string) *rosterProvider {
	t.Helper()
	host := ln.Addr().String()
	p := newSeedProvider(echo.New(), seedProviderConfig{Cluster: seedTestCluster, Seeds: append([]string{host}, seeds...),
		Refresh: 20 * time.Millisecond, Timeout: timeout, Misses: misses, NoPull: noPull,
		Log: logrus.NewEntry(testLogger(t, logrus.InfoLevel)).WithField("member", id)})
	p.server.Listener = ln
	t.Cleanup(func() { _ = p.Shutdown(false) })
	port := ln.Addr().(*net.TCPAddr).Port
	p.start(&seedNode{ID: id, Address: "127.0.0.1", Port: 1, AutoManagePort: port, ClusterName: seedTestCluster},
		func([]*pcluster.Member) {})
	return &rosterProvider{seedProvider: p, id: id, host: host}
}

func (p *rosterProvider) ids() []string { return topologyIDs(p.topology()) }

// TestIndirectProbeKeepsAMemberOthersReach: a member that one monitor
// cannot reach (its checks time out on that path) while other members
// can is not dropped: the monitor's indirect probes through them make
// each miss good. Once nobody reaches it, the same monitor drops it
// after its misses.
func TestIndirectProbeKeepsAMemberOthersReach(t *testing.T) {
	x := newFakeMember(t, "x", seedTestCluster, nil)
	lb, lc := listenManage(t), listenManage(t)
	b := startRosterProvider(t, "b", lb, 3, 2*time.Second, false, x.host(), lc.Addr().String())
	c := startRosterProvider(t, "c", lc, 3, 2*time.Second, false, x.host(), lb.Addr().String())

	// The monitor: x's endpoint is a black hole on its path only.
	p := testSeedProvider(t, 3, 200*time.Millisecond, nil, x.host(), b.host, c.host)
	p.tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == x.host() {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	eventually(t, 10*time.Second, "b and c see x", func() bool {
		return slices.Contains(b.ids(), "x") && slices.Contains(c.ids(), "x")
	})
	// p learns x from b's or c's roster, then misses every check of it.
	eventually(t, 10*time.Second, "the monitor lists x (from its peers' rosters)", func() bool {
		return slices.Contains(roundIDs(t, p), "x")
	})
	for i := range 6 {
		if ids := roundIDs(t, p); !slices.Contains(ids, "x") {
			t.Fatalf("round %d: x left the monitor's topology %v although b and c reach it", i, ids)
		}
	}
	if err := p.HealthError("x"); err != nil {
		t.Fatalf("HealthError(x) = %v: an indirect answer is not a miss", err)
	}

	// Now nobody reaches x: the monitor's misses count, and it drops x.
	x.mode.Store(hanging)
	for range 3 {
		roundIDs(t, p)
	}
	if ids := roundIDs(t, p); slices.Contains(ids, "x") {
		t.Fatalf("x unreachable by everyone is still in the monitor's topology %v", ids)
	}
}

// TestRosterSpreadsJoinsAndLeaves: members given only the next one's
// endpoint (a ring of seeds, no seed exchange) all come to list all of
// them, through the rosters their overlay neighbours serve; a member
// whose provider stops is dropped by every other, and one that joins
// through a single seed is listed by every other. A member that pulls no
// rosters sees only what it checks.
func TestRosterSpreadsJoinsAndLeaves(t *testing.T) {
	const n = 12
	lns := make([]net.Listener, n)
	for i := range lns {
		lns[i] = listenManage(t)
	}
	ps := make([]*rosterProvider, n)
	var want []string
	for i := range ps {
		id := fmt.Sprintf("m%02d", i)
		ps[i] = startRosterProvider(t, id, lns[i], 3, 2*time.Second, false, lns[(i+1)%n].Addr().String())
		want = append(want, id)
	}
	loner := startRosterProvider(t, "loner", listenManage(t), 3, 2*time.Second, true, ps[0].host)
	allSee := func(what string, ps []*rosterProvider, want []string) {
		t.Helper()
		eventually(t, 20*time.Second, what, func() bool {
			for _, p := range ps {
				if !slices.Equal(p.ids(), want) {
					return false
				}
			}
			return true
		})
	}
	allSee("every member of the ring lists all of them", ps, want)
	if got := loner.ids(); !slices.Equal(got, []string{"loner", "m00"}) {
		t.Fatalf("a member that pulls no roster lists %v, want only itself and its seed", got)
	}

	// A leave: its port closes, its monitors drop it, the others learn it.
	_ = ps[5].Shutdown(true)
	rest := slices.Delete(slices.Clone(ps), 5, 6)
	want = slices.Delete(slices.Clone(want), 5, 6)
	allSee("every member drops the one that left", rest, want)

	// A join through one seed.
	nu := startRosterProvider(t, "m99", listenManage(t), 3, 2*time.Second, false, ps[3].host)
	rest = append(rest, nu)
	want = append(want, "m99")
	allSee("every member lists the one that joined", rest, want)
}
