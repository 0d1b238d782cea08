package barrier_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/messages"
)

// Killing the primary's node mid-barrier loses no entry (participants told
// every replica) and releases nobody twice.
func TestPrimaryKilledMidBarrier(t *testing.T) {
	l := startCluster(t, 4)
	ev := watchEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "replicated", barrier.Max(6), barrier.Replicas(3), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Replicas()) != 3 {
		t.Fatalf("replicas %v", b.Replicas())
	}
	h, err := barrier.Open(ctx, l, "replicated", barrier.Host("worker"))
	if err != nil {
		t.Fatal(err)
	}
	first := enterAll(t, h, "a", "b", "c")
	eventually(ctx, t, "three entries", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 3 })
	primary := b.Replicas()[0]
	if err := l.Kill(l.IndexOf(primary)); err != nil {
		t.Fatal(err)
	}
	second := enterAll(t, h, "d", "e", "f")
	seen := map[string]int{}
	for _, r := range append(collect(first, 3), collect(second, 3)...) {
		if r.err != nil || r.pass.Reason != "max" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
		seen[r.label]++
	}
	if len(seen) != 6 {
		t.Fatalf("passed %v", seen)
	}
	ev.waitFor(ctx, t, "a takeover", func(ev *events) bool { return len(ev.tookOver) > 0 })
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entered != 6 || len(s.Passed) != 6 || s.Epoch < 1 || s.Primary == primary {
		t.Fatalf("status after takeover %+v (old primary %s)", s, primary)
	}
	passed := map[string]bool{}
	for _, p := range s.Passed {
		if passed[p.Label] {
			t.Fatalf("%s passed twice: %+v", p.Label, s.Passed)
		}
		passed[p.Label] = true
	}
	if st := h.Stats(); st.Conflicts != 0 {
		t.Fatalf("conflicting outcomes: %+v", st)
	}
}

// A semaphore keeps its bound across a takeover: the new primary knows who
// holds the section, re-sends the holder's admission (ignored as a
// duplicate) and admits the next label only after the holder's release.
func TestSemaphoreSurvivesPrimaryFailure(t *testing.T) {
	l := startCluster(t, 3)
	ev := watchEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "sem-replicated", barrier.Max(4), barrier.Semaphore(1), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	h, err := barrier.Open(ctx, l, "sem-replicated")
	if err != nil {
		t.Fatal(err)
	}
	holder, err := h.Enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var inside, most atomic.Int32
	done := make(chan error, 3)
	for i := range 3 {
		go func() {
			p, err := h.Enter(ctx, fmt.Sprintf("w%d", i))
			if err != nil {
				done <- err
				return
			}
			n := inside.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			inside.Add(-1)
			done <- p.Release(ctx)
		}()
	}
	eventually(ctx, t, "all entered", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 4 })
	if err := l.Kill(l.IndexOf(b.Replicas()[0])); err != nil {
		t.Fatal(err)
	}
	// The holder's release reaches only the backup; it takes over.
	if err := holder.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if most.Load() != 1 {
		t.Fatalf("%d holders at once", most.Load())
	}
	ev.waitFor(ctx, t, "a takeover", func(ev *events) bool { return len(ev.tookOver) == 1 })
	st := h.Stats()
	if st.Duplicates < 1 || st.Conflicts != 0 {
		t.Fatalf("stats %+v: want the re-sent admission of a ignored as a duplicate", st)
	}
	s, err := b.Status(ctx)
	if err != nil || len(s.Passed) != 4 {
		t.Fatalf("status %+v %v", s, err)
	}
}

// With every participant waiting quietly, a backup still notices that the
// primary missed a deadline, takes over and fires.
func TestBackupFiresADeadlineThePrimaryMissed(t *testing.T) {
	l := startCluster(t, 3)
	ev := watchEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	// The deadline leaves the kill below time to come first on a busy
	// machine: at 400 ms the primary fired before its kill once (load 17
	// on 2 vCPUs), and no backup had anything to take over.
	b, err := barrier.New(ctx, l, "deadline", barrier.Max(5), barrier.Timeout(2*time.Second), barrier.TakeoverAfter(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	res := enterAll(t, b, "a", "b")
	eventually(ctx, t, "two entries", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 2 })
	if err := l.Kill(l.IndexOf(b.Replicas()[0])); err != nil {
		t.Fatal(err)
	}
	for _, r := range collect(res, 2) {
		if r.err != nil || r.pass.Reason != "timeout" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
	}
	ev.waitFor(ctx, t, "a takeover", func(ev *events) bool { return len(ev.tookOver) >= 1 && ev.tookOver[0].Epoch >= 1 })
}

// A barrier placed on a node that was killed and restarted lives on its
// new incarnation (the placement follows the live members, not a fixed
// address).
func TestBarrierOnRestartedNode(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 30*time.Second)
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Restart(1); err != nil {
		t.Fatal(err)
	}
	reborn := l.Member(1).ID()
	hosts, err := l.BarrierHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	name := ""
	for i := 0; name == ""; i++ {
		if n := fmt.Sprintf("reborn-%d", i); barrier.Placement(n, hosts)[0].Member == reborn {
			name = n
		}
	}
	b, err := barrier.New(ctx, l, name, barrier.Max(2))
	if err != nil {
		t.Fatal(err)
	}
	if r := b.Replicas(); r[0] != reborn {
		t.Fatalf("replicas %v, want the primary on %s", r, reborn)
	}
	for _, r := range collect(enterAll(t, b, "x", "y"), 2) {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
}

// crashManager makes the barrier hook of TestEnterFailsWhenEveryReplicaLostTheState
// crash the manager it is sent to.
type crashManager struct{}

// When every replica of a barrier lost its state (each manager crashed
// and restarted empty, and none that held the state was left to sync
// them), an Enter fails at once with UNAVAILABLE instead of waiting for
// its deadline; no replica leads without the state. (The Enter waited for
// its deadline: the restarted replicas kept quiet.)
func TestEnterFailsWhenEveryReplicaLostTheState(t *testing.T) {
	l, err := cluster.StartLocal(barrierHooked(cluster.Config{Nodes: 3, Log: quietLog()}, func(_ string, msg any) {
		if _, ok := msg.(crashManager); ok {
			panic("test: the manager crashes and restarts without state")
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx := deadline(t, 30*time.Second)
	const name = "amnesia"
	b, err := barrier.New(ctx, l, name, barrier.Max(2), barrier.Replicas(3), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The primary first: once it restarted, the backups (with the state,
	// but not acting, and with no client or deadline to take over for)
	// answer no sync request, so nobody holds the state after the
	// backups crashed too.
	for _, member := range b.Replicas() {
		i := l.IndexOf(member)
		sys, host := l.Member(i).System(), l.Barriers(i)
		open := func() *messages.BarrierCreated {
			t.Helper()
			res, err := sys.Root.RequestFuture(host, &messages.BarrierOpen{Name: name}, 10*time.Second).Result()
			c, ok := res.(*messages.BarrierCreated)
			if err != nil || !ok {
				t.Fatalf("open on %s: %v %v", member, res, err)
			}
			return c
		}
		// A backup is created by the primary's message, after New returned.
		eventually(ctx, t, member+" hosts a replica", func() bool { return open().GetError() == nil })
		sys.Root.Send(actor.NewPID(host.GetAddress(), host.GetId()+"/"+barrieractor.ChildName(name)), crashManager{})
		// Its host forwards the Open to the manager after the crash (one
		// sender, one mailbox): the answer comes from the restarted one.
		if c := open(); c.GetError() != nil {
			t.Fatalf("open on %s after its manager crashed: %v", member, c.GetError())
		}
	}
	enterCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	_, err = b.Enter(enterCtx, "a")
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("enter with every replica's state lost: %v, want UNAVAILABLE (the replicas lost the state), not its deadline's error", err)
	}
}
