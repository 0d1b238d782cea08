package barrieractor_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/messages"
)

// A host without a manager for a barrier answers a request addressed to
// any rank NOT_FOUND, naming that rank (only rank 0's host answered, so a
// request to a barrier no replica holds waited for its deadline).
func TestHostAnswersNotFoundForEveryRank(t *testing.T) {
	h := startHosts(t, 1, barrieractor.HostConfig{})
	pid := h.pids["node-0"]
	for _, req := range []proto.Message{
		&messages.BarrierEnter{Name: "none", Label: "l", RequestId: 3, ToRank: 2},
		&messages.BarrierRelease{Name: "none", Label: "l", RequestId: 3, ToRank: 2},
		&messages.BarrierClose{Name: "none", RequestId: 3, ToRank: 2},
		&messages.BarrierStatus{Name: "none", RequestId: 3, ToRank: 2},
	} {
		res, err := h.sys.Root.RequestFuture(pid, req, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("%T to rank 2: no answer: %v", req, err)
		}
		var rank int32
		var e *messages.Error
		switch r := res.(type) {
		case *messages.BarrierRefused:
			rank, e = r.GetFromRank(), r.GetError()
		case *messages.BarrierReleased:
			rank, e = r.GetFromRank(), r.GetError()
		case *messages.BarrierClosed:
			rank, e = r.GetFromRank(), r.GetError()
		case *messages.BarrierStatusReply:
			rank, e = r.GetFromRank(), r.GetError()
		}
		if rank != 2 || !errors.Is(messages.ErrOrNil(e), messages.ErrNotFound) {
			t.Fatalf("%T to rank 2: %v, want NOT_FOUND from rank 2", req, res)
		}
	}
}

// A barrier whose every replica lost its state (each manager crashed and
// restarted empty, and none that held the state was left to sync them):
// Status, Release and Close fail at once with UNAVAILABLE, as Enter does,
// instead of waiting for their deadlines (the restarted replicas kept
// quiet).
func TestCallsFailAtOnceWhenEveryReplicaLostTheState(t *testing.T) {
	const name = "amnesia"
	h := startHosts(t, 3, barrieractor.HostConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(crash); ok {
			panic("test: the manager crashes and restarts without state")
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := barrier.New(ctx, h, name, barrier.Max(2), barrier.Replicas(3), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// The primary first: once it restarted, the backups (with the state
	// but not acting, and with no client or deadline to take over for)
	// answer no sync request.
	for _, member := range b.Replicas() {
		crashReplica(ctx, t, h, member, name)
	}
	call, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := b.Status(call); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("status: %v, want UNAVAILABLE (no replica holds the state), not its deadline's error", err)
	}
	if err := b.Release(call, "a"); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("release: %v, want UNAVAILABLE", err)
	}
	if err := b.Close(call); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("close: %v, want UNAVAILABLE", err)
	}
}

// crashReplica crashes member's manager of the barrier name, once its
// host has it, and returns once the restarted manager answers.
func crashReplica(ctx context.Context, t *testing.T, h *hosts, member, name string) {
	t.Helper()
	host := h.pids[member]
	open := func() *messages.BarrierCreated {
		t.Helper()
		res, err := h.sys.Root.RequestFuture(host, &messages.BarrierOpen{Name: name}, 10*time.Second).Result()
		c, ok := res.(*messages.BarrierCreated)
		if err != nil || !ok {
			t.Fatalf("open on %s: %v %v", member, res, err)
		}
		return c
	}
	for open().GetError() != nil { // a backup is created by the primary's message
		if ctx.Err() != nil {
			t.Fatalf("%s never hosted a replica of %s", member, name)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.sys.Root.Send(actor.NewPID(host.GetAddress(), host.GetId()+"/"+barrieractor.ChildName(name)), crash{})
	// The host forwards the Open to the manager after the crash (one
	// sender, one mailbox): the answer comes from the restarted one.
	if c := open(); c.GetError() != nil {
		t.Fatalf("open on %s after its manager crashed: %v", member, c.GetError())
	}
}

// The first replica's host without its manager (it crashed more often
// than its host restarts it) answers NOT_FOUND, but a backup holds the
// barrier: a Status is the backup's answer once it took over, not that
// NOT_FOUND (which was the answer: the host of the first replica was the
// only one that answered NOT_FOUND, and at once).
func TestStatusWaitsForTheReplicaThatHoldsTheBarrier(t *testing.T) {
	const name = "first-gone"
	h := startHosts(t, 3, barrieractor.HostConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(crash); ok {
			panic("test: the manager crashes")
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := barrier.New(ctx, h, name, barrier.Max(2), barrier.Replicas(3), barrier.TakeoverAfter(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	first := h.pids[b.Replicas()[0]]
	manager := actor.NewPID(first.GetAddress(), first.GetId()+"/"+barrieractor.ChildName(name))
	// The host restarts a manager 3 times in 10 s, then stops it.
	for {
		h.sys.Root.Send(manager, crash{})
		// A request forwarded to the manager as it stops gets no answer.
		res, err := h.sys.Root.RequestFuture(first, &messages.BarrierStatus{Name: name, ToRank: 0}, time.Second).Result()
		if r, ok := res.(*messages.BarrierStatusReply); err == nil && ok && errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrNotFound) {
			break // the host has no manager for it any more
		}
		if ctx.Err() != nil {
			t.Fatal("the first replica's host kept its manager")
		}
	}
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatalf("status with the first replica gone and two backups holding the barrier: %v", err)
	}
	if s.Primary == b.Replicas()[0] || s.Epoch == 0 {
		t.Fatalf("status %+v: want a backup's answer after its takeover", s)
	}
}
