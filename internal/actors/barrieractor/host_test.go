package barrieractor_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/logbridge"
	"github.com/hoplite-go/hoplite/messages"
)

// hosts is a bare actor system with barrier hosts and nothing else:
// members node-0, node-1, ...
type hosts struct {
	sys  *actor.ActorSystem
	pids map[string]*actor.PID
}

func (h *hosts) System() *actor.ActorSystem { return h.sys }
func (h *hosts) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}
func (h *hosts) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	var out []barrier.MemberHost
	for id, pid := range h.pids {
		out = append(out, barrier.MemberHost{Member: id, PID: pid})
	}
	return out, nil
}

func startHosts(t *testing.T, n int, cfg barrieractor.HostConfig) *hosts {
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	cfg.Log = logrus.NewEntry(log)
	h := &hosts{sys: actor.NewActorSystem(logbridge.ActorSystemOption(log)), pids: map[string]*actor.PID{}}
	for i := range n {
		id := fmt.Sprintf("node-%d", i)
		pid, err := h.sys.Root.SpawnNamed(barrieractor.NewHostProps(cfg), id+"/barriers")
		if err != nil {
			t.Fatal(err)
		}
		h.pids[id] = pid
	}
	t.Cleanup(h.sys.Shutdown)
	return h
}

type crash struct{}

// A manager that panics restarts without state and gets it back from the
// other replica: first the backup (from the primary's sync), then the
// primary (the backup takes over with everything).
func TestRestartedManagersRecoverFromTheirPeers(t *testing.T) {
	syncs := make(chan string, 16)
	forwards := make(chan string, 64) // ops forwarded to a backup
	cfg := barrieractor.HostConfig{BeforeReceive: func(manager string, msg any) {
		switch m := msg.(type) {
		case crash:
			panic("injected crash of " + manager)
		case *messages.BarrierReplicate:
			if m.GetSync() {
				syncs <- manager
			}
			if m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_ENTER {
				forwards <- manager
			}
		}
	}}
	h := startHosts(t, 2, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	took := make(chan *barrieractor.TookOver, 8)
	h.sys.EventStream.Subscribe(func(e any) {
		if e, ok := e.(*barrieractor.TookOver); ok {
			took <- e
		}
	})
	b, err := barrier.New(ctx, h, "restart", barrier.Max(4), barrier.Replicas(2), barrier.TakeoverAfter(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	rs := b.Replicas()
	managerOf := func(rank int) *actor.PID {
		return actor.NewPID(h.sys.Address(), h.pids[rs[rank]].GetId()+"/"+barrieractor.ChildName("restart"))
	}
	type res struct {
		label string
		p     *barrier.Pass
		err   error
	}
	out := make(chan res, 4)
	enter := func(l string) {
		go func() {
			p, err := b.Enter(ctx, l)
			out <- res{l, p, err}
		}()
	}
	enter("a")
	enter("b")
	for range 2 { // the backup has both entries
		select {
		case got := <-forwards:
			if got != managerOf(1).GetId() {
				t.Fatalf("forward to %s", got)
			}
		case <-ctx.Done():
			t.Fatal("no forwards")
		}
	}
	h.sys.Root.Send(managerOf(1), crash{})
	select {
	case got := <-syncs:
		if got != managerOf(1).GetId() {
			t.Fatalf("sync went to %s", got)
		}
	case <-ctx.Done():
		t.Fatal("the restarted backup got no sync")
	}
	h.sys.Root.Send(managerOf(0), crash{})
	enter("c")
	enter("d")
	var labels []string
	for range 4 {
		r := <-out
		if r.err != nil || r.p.Reason != "max" {
			t.Fatalf("%s: %+v %v", r.label, r.p, r.err)
		}
		labels = append(labels, r.label)
	}
	sort.Strings(labels)
	if fmt.Sprint(labels) != "[a b c d]" {
		t.Fatalf("passed %v", labels)
	}
	select {
	case e := <-took:
		if e.Epoch != 1 || e.Member != rs[1] {
			t.Fatalf("takeover %+v: want the backup, at epoch 1", e)
		}
	case <-ctx.Done():
		t.Fatal("no takeover")
	}
	select {
	case e := <-took:
		t.Fatalf("second takeover %+v (by a replica without state?)", e)
	default:
	}
}

func TestHostLimitsAndTombstones(t *testing.T) {
	h := startHosts(t, 1, barrieractor.HostConfig{MaxBarriers: 2, Tombstones: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var bs []*barrier.Barrier
	for i := range 2 {
		b, err := barrier.New(ctx, h, fmt.Sprintf("b%d", i), barrier.Max(1))
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, b)
	}
	if _, err := barrier.New(ctx, h, "b2", barrier.Max(1)); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("third barrier on a host of two: %v, want CAPACITY", err)
	}
	// Closing frees room (once the host heard of it); the host remembers
	// one closed name.
	for i, b := range bs {
		if err := b.Close(ctx); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("new%d", i)
		for {
			_, err := barrier.New(ctx, h, name, barrier.Max(1))
			if err == nil {
				break
			}
			if !errors.Is(err, messages.ErrCapacity) {
				t.Fatalf("%s: %v", name, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	if _, err := barrier.Open(ctx, h, "b1"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("open b1: %v, want DELETED", err)
	}
	if _, err := barrier.Open(ctx, h, "b0"); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("open b0: %v, want NOT_FOUND (its tombstone was evicted)", err)
	}
}

// A manager that starts after the cluster declared a member failed knows
// of it: a Close does not wait for the acknowledgement of that member's
// replica (here it is alive but loses every close, so an ack can never
// come), and returns without error.
func TestManagerStartedAfterAFailureKnowsOfIt(t *testing.T) {
	const name = "after-failure"
	// The failed member: the barrier's first backup (startHosts names
	// its members node-0, node-1, node-2).
	down := barrier.Placement(name, []barrier.MemberHost{{Member: "node-0"}, {Member: "node-1"}, {Member: "node-2"}})[1].Member
	h := startHosts(t, 3, barrieractor.HostConfig{BeforeReceive: func(manager string, msg any) {
		if !strings.HasPrefix(manager, down+"/") {
			return
		}
		switch m := msg.(type) {
		case *messages.BarrierClose:
			panic("test: the failed member's replica loses the closer's Close")
		case *messages.BarrierReplicate:
			if m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE || slices.ContainsFunc(m.GetLog(), func(op *messages.BarrierOp) bool {
				return op.GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE
			}) {
				panic("test: the failed member's replica loses the primary's close")
			}
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Told before the barrier exists: no manager can hear it as it
	// happens. (Each host is told, as each member's failure path tells
	// its own; an answer from each shows it handled the notice.)
	for id, pid := range h.pids {
		h.sys.Root.Send(pid, &barrieractor.MemberFailed{Member: down, Address: h.pids[down].GetAddress()})
		if _, err := h.sys.Root.RequestFuture(pid, &messages.BarrierOpen{Name: name}, 10*time.Second).Result(); err != nil {
			t.Fatalf("host %s: %v", id, err)
		}
	}
	b, err := barrier.New(ctx, h, name, barrier.Max(2), barrier.Replicas(3), barrier.TakeoverAfter(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Replicas(); len(got) != 3 || got[1] != down {
		t.Fatalf("replicas %v, want %s second", got, down)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close with the failed member's replica silent: %v", err)
	}
}
