package cluster_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strconv"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/testutil"
)

// An embedded cluster: four members in this process. An object Put on
// one member can be fetched from any other.
func ExampleStartLocal() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 4})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if err := l.Client(0).Put(ctx, "greeting", []byte("hello, cluster")); err != nil {
		log.Fatal(err)
	}
	b, err := l.Client(3).Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output: hello, cluster
}

// Two members of a cluster of processes, here both in this one: each
// lists every member's manage endpoint as a seed (its own included).
func ExampleJoin() {
	bind := []string{freeAddr(), freeAddr()}
	manage := []string{freeAddr(), freeAddr()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var members []*cluster.Member
	for i := range bind {
		_, port, _ := net.SplitHostPort(manage[i])
		p, _ := strconv.Atoi(port)
		m, err := cluster.Join(ctx, cluster.MemberConfig{Bind: bind[i], ManagePort: p, Seeds: manage})
		if err != nil {
			log.Fatal(err)
		}
		defer m.Stop()
		members = append(members, m)
	}
	if err := members[0].WaitMembers(ctx, 2); err != nil {
		log.Fatal(err)
	}
	if err := members[1].WaitMembers(ctx, 2); err != nil {
		log.Fatal(err)
	}
	if err := members[0].Client().Put(ctx, "model", []byte("weights v1")); err != nil {
		log.Fatal(err)
	}
	b, err := members[1].Client().Get(ctx, "model")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(members[1].Members()), "members;", string(b))
	// Output: 2 members; weights v1
}

// freeAddr is a loopback address with a port nothing listens on now.
func freeAddr() string {
	a, err := testutil.FreeAddr()
	if err != nil {
		log.Fatal(err)
	}
	return a
}

// A program that is not a member uses a running cluster through any
// member's address (here an embedded cluster's; a `hoplite node` prints
// its own at start).
func ExampleDial() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c, err := cluster.Dial(ctx, l.Member(0).Address())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.PutFloat64s(ctx, "params", []float64{0.5, 1.5}); err != nil {
		log.Fatal(err)
	}
	got, err := l.Client(2).GetFloat64s(ctx, "params") // from a member
	if err != nil {
		log.Fatal(err)
	}
	members, err := c.Members(ctx)
	if err != nil {
		log.Fatal(err)
	}
	page, err := c.List(ctx, "", 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(members), "members;", got, "; listed", len(page.Objects))
	// Output: 3 members; [0.5 1.5] ; listed 1
}

// An application actor in an actor system of its own (another process
// than the members, typically) moves objects' bytes on the data plane
// through a client made from that system. A call blocks, so the actor
// makes it on a goroutine and sends itself the result.
func ExampleWithActorSystem() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A member with a TCP data plane, as `hoplite node` runs one.
	manage := freeAddr()
	_, port, _ := net.SplitHostPort(manage)
	p, _ := strconv.Atoi(port)
	m, err := cluster.Join(ctx, cluster.MemberConfig{Bind: freeAddr(), ManagePort: p, Seeds: []string{manage}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Stop()
	if err := m.Client().Put(ctx, "weights", []byte("v1")); err != nil {
		log.Fatal(err)
	}

	// The application's actor system, its remote started.
	system := actor.NewActorSystem()
	r := remote.NewRemote(system, cluster.RemoteConfig("127.0.0.1", 0, nil, nil))
	r.Start()
	defer r.Shutdown(true)
	c, err := cluster.Dial(ctx, m.Address(), cluster.WithActorSystem(system))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	type fetched struct {
		data []byte
		err  error
	}
	done := make(chan string, 1)
	system.Root.Spawn(actor.PropsFromFunc(func(a actor.Context) {
		switch m := a.Message().(type) {
		case *actor.Started:
			self, sys := a.Self(), a.ActorSystem()
			go func() {
				b, err := c.Get(ctx, "weights")
				sys.Root.Send(self, &fetched{b, err})
			}()
		case *fetched:
			if m.err != nil {
				done <- m.err.Error()
				return
			}
			done <- string(m.data)
		}
	}))
	fmt.Println(<-done)
	// Output: v1
}
