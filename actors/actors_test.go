package actors_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/actors"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// app is an application's actor system running Hoplite's actors from
// this package under a parent of its own.
type app struct {
	system *actor.ActorSystem
	stores []*actors.Store
	nodes  []*actor.PID
	refs   []*messages.NodeRef
}

// startApp starts an actor system whose actor "app" spawns shards
// directory shards and nodes store nodes as its children, supervised as a
// member supervises them, the nodes' bytes moving on data.
func startApp(t *testing.T, data *actors.Transport, nodes, shards int) *app {
	t.Helper()
	a := &app{system: actor.NewActorSystem()}
	t.Cleanup(a.system.Shutdown)
	const parent = "app"
	var shardPIDs []*actor.PID
	for j := range shards {
		shardPIDs = append(shardPIDs, actor.NewPID(a.system.Address(), fmt.Sprintf("%s/shard-%d", parent, j)))
	}
	shardFor := actors.ShardFor(shardPIDs)
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		store := actors.NewStore(256 << 20)
		addr, err := data.Serve(name, store)
		if err != nil {
			t.Fatal(err)
		}
		a.stores = append(a.stores, store)
		a.refs = append(a.refs, &messages.NodeRef{NodeId: name, Address: a.system.Address(), ActorId: parent + "/" + name, DataAddress: addr})
		a.nodes = append(a.nodes, actor.NewPID(a.system.Address(), parent+"/"+name))
	}
	started := make(chan struct{})
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); !ok {
			return
		}
		for j := range shards {
			ctx.SpawnNamed(actors.Shard(actors.ShardConfig{Index: j, Count: shards,
				Nodes:       func() []*messages.NodeRef { return a.refs },
				Coordinator: actors.CoordinatorConfig{ShardFor: shardFor}}), fmt.Sprintf("shard-%d", j))
		}
		for i, ref := range a.refs {
			ctx.SpawnNamed(actors.StoreNode(actors.StoreNodeConfig{Self: ref, Store: a.stores[i], ShardFor: shardFor, Transport: data}), ref.GetNodeId())
		}
		close(started)
	}, actor.WithSupervisor(actors.Supervision()))
	if _, err := a.system.Root.SpawnNamed(props, parent); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the parent did not start its children")
	}
	return a
}

func (a *app) client(i int) *storenode.Client {
	return storenode.NewClient(a.system.Root, a.nodes[i], 0)
}

// Put, Get and Reduce through the actors this package makes: an object
// put on one node is fetched by another over the transport; a Reduce of
// sources on every node runs its coordinator under the target's shard,
// and its plan is the one package coordinator predicts.
func TestActorsServePutGetAndReduce(t *testing.T) {
	const n = 3
	a := startApp(t, actors.NewMemoryTransport(0), n, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	obj := bytes.Repeat([]byte("hoplite!"), 128<<10) // 1 MiB: fetched, not inline
	if err := a.client(0).Put(ctx, "x", obj); err != nil {
		t.Fatal(err)
	}
	got, err := a.client(2).Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, obj) {
		t.Fatalf("node-2 read %d bytes, not the %d put on node-0", len(got), len(obj))
	}
	if a.stores[2].Lookup("x") == nil {
		t.Fatal("node-2 answered the Get without a copy of its own: nothing crossed the transport")
	}

	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("g%d", i))
		v := make([]float32, 256<<10) // 1 MiB each: a tree
		for k := range v {
			v[k] = float32(i + 1)
		}
		if err := storenode.PutNumbers(ctx, a.client(i), ids[i], v); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := storenode.ReduceNumbers[float32](ctx, a.client(1), "sum", ids, n, messages.ReduceOp_SUM)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := storenode.GetNumbers[float32](ctx, a.client(0), "sum")
	if err != nil {
		t.Fatal(err)
	}
	if len(sum) != 256<<10 || sum[0] != 6 || sum[len(sum)-1] != 6 {
		t.Fatalf("sum: %d elements, first %v, last %v; want 262144 of 6", len(sum), sum[0], sum[len(sum)-1])
	}
	plan := coordinator.FromReply(rep.GetPlan())
	want, err := coordinator.Choose(coordinator.Input{Sources: n, Size: plan.Size, Latency: plan.Latency, Bandwidth: plan.Bandwidth})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Shape != coordinator.DAry || plan.Degree != want.Degree || len(plan.Parents) != n {
		t.Fatalf("the Reduce's plan %v, want %v over %d positions", plan, want, n)
	}
}

// An application actor's raw messages are answered as the package says:
// a Put and a Get of a store node, and a Get of an object that does not
// exist fails with a typed error when its deadline passes.
func TestStoreNodeAnswersRawMessages(t *testing.T) {
	a := startApp(t, actors.NewMemoryTransport(0), 1, 1)
	root := a.system.Root
	res, err := root.RequestFuture(a.nodes[0], &messages.Put{ObjectId: "small", Data: []byte("inline")}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if e := res.(*messages.PutReply).GetError(); e != nil {
		t.Fatalf("Put: %v", e)
	}
	res, err = root.RequestFuture(a.nodes[0], &messages.Get{ObjectId: "small"}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if g := res.(*messages.GetReply); g.GetError() != nil || string(g.GetData()) != "inline" {
		t.Fatalf("Get: %q, %v", g.GetData(), g.GetError())
	}
	res, err = root.RequestFuture(a.nodes[0], &messages.Get{ObjectId: "absent", TimeoutMs: 50}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if e := res.(*messages.GetReply).GetError(); e == nil || !errors.Is(e, messages.ErrTimeout) {
		t.Fatalf("Get of an absent object with a 50 ms deadline: %v, want TIMEOUT", e)
	}
}

// Store nodes whose bytes move on a TCP Transport: an object put on one
// is fetched by the other from its data address, a TCP endpoint; once
// the Transport is closed it serves no node.
func TestStoreNodesFetchOverTCP(t *testing.T) {
	data := actors.NewTCPTransport(actors.TCPConfig{})
	t.Cleanup(data.Close)
	a := startApp(t, data, 2, 1)
	for _, ref := range a.refs {
		if !strings.HasPrefix(ref.GetDataAddress(), "127.0.0.1:") {
			t.Fatalf("%s serves at %q, want a TCP address on 127.0.0.1", ref.GetNodeId(), ref.GetDataAddress())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	obj := bytes.Repeat([]byte("tcp!"), 256<<10) // 1 MiB: fetched, not inline
	if err := a.client(0).Put(ctx, "x", obj); err != nil {
		t.Fatal(err)
	}
	got, err := a.client(1).Get(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, obj) || a.stores[1].Lookup("x") == nil {
		t.Fatalf("node-1 read %d bytes (a copy of its own: %v), want the %d put on node-0", len(got), a.stores[1].Lookup("x") != nil, len(obj))
	}

	data.Close()
	if addr, err := data.Serve("late", actors.NewStore(1<<20)); err == nil {
		t.Fatalf("a closed Transport served a node at %q", addr)
	}
}
