package processtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/etcdtest"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// The etcd provider against a real etcd server (etcd's embeddable server,
// in this test process), with `hoplite node` processes.

func startEtcdNode(t *testing.T, bin string, slot memberSlot, endpoint string, extra ...string) *nodeProc {
	t.Helper()
	return startNode(t, bin, slot, nil, append([]string{"-provider", "etcd", "-provider-address", endpoint}, extra...)...)
}

// TestProcessEtcd: three members find each other through etcd (no seeds),
// Put, Get and Reduce give exact results, a SIGKILLed member is published
// failed by the survivors and leaves their views, and restarted at the
// same address it rejoins and serves.
func TestProcessEtcd(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	srv := etcdtest.Start(t)
	bin := hopliteBinary(t)
	slots, _ := memberSlots(t, 3)
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startEtcdNode(t, bin, s, srv.Endpoint()))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)

	// Put at one member, Get at the others; a Reduce over one int32
	// source per member, coordinated at the last one.
	obj := randomBytes(21, 1<<20+3)
	putRetry(t, c.of(nodes[0]), "etcd-obj", obj)
	for _, n := range nodes[1:] {
		getExact(t, c.of(n), "etcd-obj", obj)
	}
	// The manage port serves /metrics with etcd too.
	if code, body := scrape(t, nodes[0], "/metrics"); code != http.StatusOK ||
		sample(body, "hoplite_store_pinned_bytes", "") < float64(len(obj)) {
		t.Fatalf("/metrics of an etcd member: %d, pinned %v", code, sample(body, "hoplite_store_pinned_bytes", ""))
	}
	const elems = 64 << 10 // 256 KiB sources: a real tree, not inline
	want := make([]byte, 4*elems)
	var sources []string
	for i, n := range nodes {
		b := make([]byte, 4*elems)
		for k := range elems {
			v := uint32(i*1000 + k)
			binary.LittleEndian.PutUint32(b[4*k:], v)
			binary.LittleEndian.PutUint32(want[4*k:], binary.LittleEndian.Uint32(want[4*k:])+v)
		}
		id := fmt.Sprintf("etcd-src-%d", i)
		putRetry(t, c.of(n), id, b)
		sources = append(sources, id)
	}
	target := idOwnedBy(t, view, nodes[2].id, "etcd-sum")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	r, err := c.of(nodes[2]).Reduce(ctx, target, sources, len(sources), messages.ReduceOp_SUM, messages.DType_INT32)
	cancel()
	if err != nil {
		t.Fatalf("reduce: %v", err)
	}
	if len(r.GetReducedIds()) != len(sources) {
		t.Fatalf("reduced %v, want all of %v", r.GetReducedIds(), sources)
	}
	getExact(t, c.of(nodes[0]), target, want)

	// SIGKILL: the survivors publish the failure (on a connection to it,
	// or when its lease expires) and place the shards without it.
	victim := nodes[1]
	survivors := without(nodes, victim)
	killed := time.Now()
	victim.kill()
	for _, n := range survivors {
		testutil.Eventually(t, 20*time.Second, n.id+" publishes the failure of "+victim.id, func() bool {
			_, ok := n.failureSeen(victim.id)
			return ok
		})
		at, _ := n.failureSeen(victim.id)
		t.Logf("%s published the failure of %s %v after the SIGKILL", n.id, victim.id, at.Sub(killed).Round(time.Millisecond))
	}
	c.converge(t, survivors...)
	getExact(t, c.of(survivors[1]), "etcd-obj", obj) // the creator's copy

	// Restarted at the same address: a new incarnation that rejoins.
	back := startEtcdNode(t, bin, victim.slot, srv.Endpoint())
	back.waitStarted(t, 60*time.Second)
	if back.id == victim.id {
		t.Fatalf("the restarted member reused the id %s", victim.id)
	}
	nodes = replace(nodes, victim, back)
	c.converge(t, nodes...)
	getExact(t, c.of(back), "etcd-obj", obj)
	getExact(t, c.of(back), target, want)
}

// TestProcessEtcdNotEtcd: `hoplite node` with a provider address that is
// not etcd exits non-zero with a clear message, by its --join-timeout;
// and SIGTERM ends a join that waits on such a server.
func TestProcessEtcdNotEtcd(t *testing.T) {
	bin := hopliteBinary(t)
	addr := etcdtest.NotEtcd(t)
	slots, _ := memberSlots(t, 2)
	exit := func(p *nodeProc) string {
		t.Helper()
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not exit", p.slot.bind)
		}
		if p.exitErr == nil {
			t.Fatalf("%s exited 0", p.slot.bind)
		}
		return p.stderr.String()
	}
	p := startEtcdNode(t, bin, slots[0], addr, "-join-timeout", "2s")
	if out := exit(p); !strings.Contains(out, "etcd server at "+addr) || strings.Contains(out, "panic") {
		t.Fatalf("not etcd: %s", tail(out, 5))
	}
	p = startEtcdNode(t, bin, slots[1], addr, "-join-timeout", "10m")
	logged(t, p, "checking the membership provider's server", map[string]string{"provider_address": addr})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if out := exit(p); !strings.Contains(out, "etcd server at "+addr) || !strings.Contains(out, "canceled") {
		t.Fatalf("SIGTERM during the join: %s", tail(out, 5))
	}
}

// TestProcessEtcdOutage: the etcd server stops while members run. They
// say so, keep serving what they hold (Get, Put) and declare nobody
// failed; when it is back they say so, and a new member joins. After an
// etcd that comes back empty (its leases and keys lost), the members
// register again and no member is declared failed either.
func TestProcessEtcdOutage(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	srv := etcdtest.Start(t)
	bin := hopliteBinary(t)
	slots, _ := memberSlots(t, 4)
	var nodes []*nodeProc
	for _, s := range slots[:3] {
		nodes = append(nodes, startEtcdNode(t, bin, s, srv.Endpoint()))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	obj := randomBytes(31, 1<<20+1)
	putRetry(t, c.of(nodes[0]), "outage-obj", obj)

	outage := func(restart func(), round int) {
		t.Helper()
		srv.Stop()
		for _, n := range nodes {
			logged(t, n, "membership provider unreachable: the membership is frozen at its last view; this member keeps serving what it holds",
				map[string]string{"provider_address": srv.Endpoint()})
		}
		during := randomBytes(uint64(32+round), 1<<20+9)
		id := fmt.Sprintf("during-outage-%d", round)
		putRetry(t, c.of(nodes[1]), id, during)
		for _, n := range nodes {
			getExact(t, c.of(n), "outage-obj", obj)
			getExact(t, c.of(n), id, during)
		}
		c.converge(t, nodes...)
		restart()
		for _, n := range nodes {
			logged(t, n, "membership provider reachable again: membership resumed", nil)
		}
	}
	outage(srv.Restart, 0)
	// Resumed: a member that starts now is seen by all.
	fourth := startEtcdNode(t, bin, slots[3], srv.Endpoint())
	fourth.waitStarted(t, 60*time.Second)
	nodes = append(nodes, fourth)
	c.converge(t, nodes...)

	outage(srv.RestartEmpty, 1)
	for _, n := range nodes {
		logged(t, n, "membership lease expired (the provider was unreachable for longer than its TTL): registering again", nil)
	}
	// Past the grace period the view is etcd's again: still everyone.
	time.Sleep((cluster.EtcdLeaseTTL + 2) * time.Second)
	c.converge(t, nodes...)
	for _, n := range nodes {
		for _, o := range nodes {
			if _, failed := n.failureSeen(o.id); failed {
				t.Fatalf("%s declared %s failed during an etcd outage", n.id, o.id)
			}
		}
	}
	getExact(t, c.of(fourth), "outage-obj", obj)
}
