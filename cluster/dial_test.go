package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A remote whose port is taken fails with an error that says so
// (errors.Is EADDRINUSE: the embedded cluster retries on another port).
func TestRemotePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	system := actor.NewActorSystem()
	err = startRemote(remote.NewRemote(system, remoteConfig("127.0.0.1", port)))
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("start a remote on a taken port: %v, want EADDRINUSE", err)
	}
}

// Dialing a member's manage port (what --seeds lists) fails at once with
// INVALID_ARGUMENT naming the member's address, which then dials.
func TestDialManagePortNamesTheMember(t *testing.T) {
	slots, seeds := memberSlots(t, 1)
	m, err := joinSlot(t, slots[0], seeds, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = Dial(ctx, slots[0].manage)
	if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "dial the member's address, "+m.Address()) {
		t.Fatalf("Dial of the manage port %s: %v; want INVALID_ARGUMENT naming %s", slots[0].manage, err, m.Address())
	}
	c, err := Dial(ctx, m.Address())
	if err != nil {
		t.Fatalf("Dial of the address it named: %v", err)
	}
	c.Close()
}

// Hello to an address where an actor system answers but no member runs
// says so once, with one error code, instead of "does not answer".
func TestHelloOfAnActorSystemWithoutAMember(t *testing.T) {
	system := actor.NewActorSystem()
	r := remote.NewRemote(system, remoteConfig("127.0.0.1", 0))
	if err := startRemote(r); err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown(true)
	client := actor.NewActorSystem()
	cr := remote.NewRemote(client, remoteConfig("127.0.0.1", 0))
	if err := startRemote(cr); err != nil {
		t.Fatal(err)
	}
	defer cr.Shutdown(true)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := Hello(ctx, client.Root, system.Address())
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("Hello of a bare actor system: %v, want UNAVAILABLE", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "no Hoplite member") || strings.Count(msg, "UNAVAILABLE") != 1 || strings.Contains(msg, "does not answer") {
		t.Fatalf("Hello of a bare actor system: %q; want one UNAVAILABLE saying no Hoplite member runs there", msg)
	}
}

// A List that began with a view the members have since left behind (one
// member missing from it) still lists every shard: a retry asks for the
// view again instead of asking the stale owner until the deadline.
func TestListShardFollowsTheView(t *testing.T) {
	ms := joinMembers(t, 2, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, ms[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fresh, err := c.liveHello(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.GetView()) != 2 {
		t.Fatalf("the view has %d members, want 2", len(fresh.GetView()))
	}
	stale := proto.Clone(fresh).(*messages.MemberHelloReply)
	stale.View, stale.ViewStores = stale.View[:1], stale.ViewStores[:1]
	moved := 0
	for j := range int(fresh.GetShards()) {
		if shardHost(stale, j).String() == shardHost(fresh, j).String() {
			continue
		}
		moved++
		if _, err := c.listShard(ctx, stale, j, "", 10); err != nil {
			t.Fatalf("list shard %d from a stale view: %v", j, err)
		}
	}
	if moved == 0 {
		t.Fatal("no shard is placed differently by the stale view: the test checks nothing")
	}
}
