package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// locatesServed is how many Locates member i's shards answered on the
// data plane with result.
func locatesServed(l *Local, i int, result string) float64 {
	return promtest.ToFloat64(l.Member(i).metrics.locates.WithLabelValues(result))
}

// A Get whose object's shard is on another member asks it on the data
// plane, and the answer comes back on it, for an inline object and for
// one that streams alike. A Get whose shard is local asks it in process.
func TestLocateTravelsOnTheDataPlane(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	ctx := deadline(t, 20*time.Second)
	for _, size := range []int{1 << 10, 1 << 20} {
		result := "ok"
		id := idOnNode(fmt.Sprintf("dp%d", size), 1, 3, 3) // shard on node 1; Put on 0, Get on 2
		data := testutil.Pattern(byte(size), size)
		if err := l.Client(0).Put(ctx, id, data); err != nil {
			t.Fatal(err)
		}
		before := locatesServed(l, 1, result)
		got, err := l.Client(2).Get(ctx, id)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %s (%d B): %v", id, size, err)
		}
		if n := locatesServed(l, 1, result) - before; n != 1 {
			t.Fatalf("%d B: node 1 answered %v Locates on the data plane with %s for one remote Get, want 1", size, n, result)
		}
		// node 1 Gets it too: its shard is local, no data-plane Locate.
		if _, err := l.Client(1).Get(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := locatesServed(l, 1, result) - before; n != 1 {
			t.Fatalf("%d B: a Get on the shard's own member went on the data plane (%v Locates)", size, n)
		}
	}
}

// ActorLocates (the benchmarks' comparison) keeps every Locate an actor
// message.
func TestActorLocatesKeepLocatesOffTheDataPlane(t *testing.T) {
	l := start(t, Config{exp: experiments.Set{ActorLocates: true}, Nodes: 3})
	ctx := deadline(t, 20*time.Second)
	id := idOnNode("actor", 1, 3, 3)
	data := testutil.Pattern(3, 1000)
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Client(2).Get(ctx, id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %v", err)
	}
	if n := locatesServed(l, 1, "ok"); n != 0 {
		t.Fatalf("%v Locates on the data plane with ActorLocates", n)
	}
}

// A Get that waits for an object on another member's shard and gives up
// withdraws exactly its own parked Locate: the shard forgets the waiter
// (no object entry is left), and a Get of the same object started at
// once after it — whose Locate may reach the shard before the first one's
// hangup — still gets the object when it is Put.
func TestLocateOnTheDataPlaneWithdrawnByHangup(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	ctx := deadline(t, 30*time.Second)
	id := idOnNode("wait", 1, 3, 3)
	// CountObjects is an in-process message: asked of the shard where it
	// runs now, from its own member (a PID taken from another member's
	// table before its view settled named another address, and the
	// request went out as a remote message that cannot be sent).
	objects := func() int {
		pid := l.Shard(directory.ShardIndex(id, 3))
		host := l.NodeOf(pid.GetAddress())
		if host < 0 {
			return -1
		}
		res, err := l.Member(host).System().Root.RequestFuture(pid, shardactor.CountObjects{}, 5*time.Second).Result()
		if err != nil {
			t.Logf("counting the shard's objects: %v", err)
			return -1
		}
		return res.(shardactor.ObjectCount).Objects
	}
	for round := range 3 {
		gctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := l.Client(2).Get(gctx, id)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond) // parked at the shard
		cancel()
		if err := <-done; !errors.Is(err, messages.ErrCanceled) && !errors.Is(err, messages.ErrTimeout) {
			t.Fatalf("round %d: a canceled Get = %v", round, err)
		}
		if round == 0 {
			eventually(t, 10*time.Second, "the shard forgot the abandoned Locate", func() bool { return objects() == 0 })
		}
	}
	// A Get right after an abandoned one.
	gctx, cancel := context.WithCancel(ctx)
	go func() { _, _ = l.Client(2).Get(gctx, id) }()
	time.Sleep(10 * time.Millisecond)
	cancel()
	got := make(chan error, 1)
	data := testutil.Pattern(7, 100)
	go func() {
		b, err := l.Client(2).Get(ctx, id)
		if err == nil && !bytes.Equal(b, data) {
			err = errors.New("other bytes")
		}
		got <- err
	}()
	time.Sleep(30 * time.Millisecond)
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the Get after an abandoned one: %v", err)
	}
}
