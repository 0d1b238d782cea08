package barrier_test

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// carriesClose: a replication message that would tell a backup of a close.
func carriesClose(m *messages.BarrierReplicate) bool {
	if m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE {
		return true
	}
	for _, op := range m.GetLog() {
		if op.GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE {
			return true
		}
	}
	return false
}

// Once Close returns without error, no member answers an Open of the
// barrier as open; a backup that cannot hear the close makes Close fail
// with TIMEOUT instead of returning while that backup still answers open.
func TestCloseReturnsOnceNoReplicaAnswersOpen(t *testing.T) {
	l, err := cluster.StartLocal(barrierHooked(cluster.Config{Nodes: 3, Log: quietLog()}, func(_ string, msg any) {
		// The backup of barrier "cut" never learns of its close: every
		// message that would tell it crashes it (the message is lost and
		// the manager restarts).
		switch m := msg.(type) {
		case *messages.BarrierClose:
			if m.GetName() == "cut" && m.GetToRank() != 0 {
				panic("test: the backup loses the closer's Close")
			}
		case *messages.BarrierReplicate:
			if m.GetName() == "cut" && carriesClose(m) {
				panic("test: the backup loses the primary's close")
			}
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx := deadline(t, 20*time.Second)
	hosts, err := l.BarrierHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// openAnywhere names a member whose barrier host answers name open.
	openAnywhere := func(name string) string {
		t.Helper()
		for _, h := range hosts {
			res, err := actorutil.Request(ctx, l.System().Root, h.PID, &messages.BarrierOpen{Name: name})
			if err != nil {
				t.Fatalf("open %q on %s: %v", name, h.Member, err)
			}
			if c, ok := res.(*messages.BarrierCreated); ok && c.GetError() == nil {
				return h.Member
			}
		}
		return ""
	}
	for _, name := range []string{"whole", "cut"} {
		b, err := barrier.New(ctx, l, name, barrier.Max(3), barrier.TakeoverAfter(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		err = b.Close(ctx)
		switch {
		case name == "whole" && err != nil:
			t.Fatalf("close %q with every replica reachable: %v", name, err)
		case err == nil:
			if m := openAnywhere(name); m != "" {
				t.Fatalf("%q: Close returned, but %s answers it open", name, m)
			}
		case !errors.Is(err, messages.ErrTimeout):
			t.Fatalf("close %q: %v, want TIMEOUT (its backup never heard it)", name, err)
		}
	}
}

// A Close after a takeover waits only for the replicas still alive: the
// old primary's member failed (events.NodeFailed was delivered everywhere)
// and will never acknowledge, so Close returns once the live replicas
// applied it, and none of them answers the barrier open. (It failed with
// TIMEOUT while the new primary waited for the dead one's ack.)
func TestCloseAfterTakeoverWaitsOnlyForLiveReplicas(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "taken-over", barrier.Max(3), barrier.Replicas(3), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	old := b.Replicas()[0]
	if err := l.Kill(l.IndexOf(old)); err != nil {
		t.Fatal(err)
	}
	// A query the old primary never answers makes a backup take over.
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Primary == old || s.Epoch < 1 {
		t.Fatalf("status %+v: no takeover from %s", s, old)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("close after the takeover: %v", err)
	}
	hosts, err := l.BarrierHosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		res, err := actorutil.Request(ctx, l.System().Root, h.PID, &messages.BarrierOpen{Name: "taken-over"})
		if err != nil {
			t.Fatalf("open on %s: %v", h.Member, err)
		}
		if c, ok := res.(*messages.BarrierCreated); !ok || !errors.Is(messages.ErrOrNil(c.GetError()), messages.ErrDeleted) {
			t.Fatalf("Close returned, but %s answers %v, want DELETED", h.Member, res)
		}
	}
}
