package barrieractor_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/messages"
)

// A label that entered up the tree is released down it, by the host it
// entered at; when its participant is gone, that host's dead letter
// reaches the replicas and the primary reports the label failed, as it
// does for a release it sent itself.
func TestTreeReleaseToAGoneParticipantIsReported(t *testing.T) {
	const name = "tree-gone"
	var combined atomic.Int32
	h := startHosts(t, 3, barrieractor.HostConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(*messages.BarrierEnters); ok {
			combined.Add(1)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	failures := make(chan barrier.Failure, 4)
	b, err := barrier.New(ctx, h, name, barrier.Max(2), barrier.Fanout(4), barrier.OnFailure(func(f barrier.Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.sys.Root.RequestFuture(h.pids[b.Replicas()[0]], &messages.BarrierOpen{Name: name}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	shape := res.(*messages.BarrierCreated).GetTree()
	if len(shape.GetHosts()) != 3 {
		t.Fatalf("tree of %d hosts, want the 3 members'", len(shape.GetHosts()))
	}
	gone, ok := h.sys.ProcessRegistry.Add(goneParticipant{h.sys}, "gone-participant")
	if !ok {
		t.Fatal("gone-participant registered twice")
	}
	leaf := replica.PeerPID(shape.GetHosts()[2])
	h.sys.Root.RequestWithCustomSender(leaf, &messages.BarrierTreeEnter{Leaf: 2, Shape: shape,
		Enter: &messages.BarrierEnter{Name: name, Label: "a", Host: "far", RequestId: 1}}, gone)
	if _, err := b.Enter(ctx, "b"); err != nil { // the second entry fires
		t.Fatal(err)
	}
	select {
	case f := <-failures:
		if f.Label != "a" || f.Host != "far" || f.Reason != replica.ReasonGone {
			t.Fatalf("failure %+v, want label a of host far, %q", f, replica.ReasonGone)
		}
	case <-ctx.Done():
		t.Fatal("the release to a gone participant was not reported")
	}
	if combined.Load() == 0 {
		t.Fatal("no arrival came up the tree")
	}
}

// A host refuses to take a tree it has no place in, or one that names no
// replica: what comes for it is dropped (the participant asks the
// replicas again), and nothing reaches a manager.
func TestTreeHostDropsATreeItIsNotIn(t *testing.T) {
	var combined atomic.Int32
	h := startHosts(t, 2, barrieractor.HostConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(*messages.BarrierEnters); ok {
			combined.Add(1)
		}
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := barrier.New(ctx, h, "elsewhere", barrier.Max(1))
	if err != nil {
		t.Fatal(err)
	}
	other := actor.NewPID(h.sys.Address(), "nobody/barriers")
	me := replica.Peer(h.pids["node-0"])
	replicas := []*messages.BarrierPeer{replica.Peer(h.pids[b.Replicas()[0]])}
	for _, shape := range []*messages.BarrierTreeShape{
		{Hosts: []*messages.BarrierPeer{replica.Peer(other), replica.Peer(other)}, Fanout: 4, Max: 2, Replicas: replicas}, // not in it
		{Hosts: []*messages.BarrierPeer{me, replica.Peer(other)}, Fanout: 4, Max: 2},                                      // no replica
		{Hosts: []*messages.BarrierPeer{me, replica.Peer(other)}, Fanout: 1, Max: 2, Replicas: replicas},                  // bad fan-out
		{Hosts: []*messages.BarrierPeer{me, me}, Fanout: 4, Max: 2, Replicas: replicas},                                   // twice
	} {
		h.sys.Root.Send(h.pids["node-0"], &messages.BarrierTreeEnter{Leaf: 0, Shape: shape,
			Enter: &messages.BarrierEnter{Name: "elsewhere", Label: "x", RequestId: 1}})
	}
	// The barrier still works, its own Enters up its own tree.
	if _, err := b.Enter(ctx, "y"); err != nil {
		t.Fatal(err)
	}
	st, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Entered != 1 {
		t.Fatalf("%d entered, want only y", st.Entered)
	}
}
