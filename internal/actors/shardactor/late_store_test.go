package shardactor

import (
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A store node that comes into the member's view after the shard's table
// started, even after every node it asked had republished, is asked too,
// and a Delete of an id the table does not know waits for it: it may
// hold a copy (a member that rejoined placed its shards before its view
// held every member). The table answered such a Delete NOT_FOUND of an
// object the late node held (nemesis seed 560060).
func TestShardAsksAStoreNodeThatJoinsItsViewLate(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	none := func(*messages.NodeRef) []*messages.PublishLocation { return nil }
	early := fakeRepublisher(t, system, "early", false, none)
	late := fakeRepublisher(t, system, "late", true, func(self *messages.NodeRef) []*messages.PublishLocation {
		return []*messages.PublishLocation{{ObjectId: "x", Node: self, State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true}}
	})
	var view atomic.Pointer[[]*messages.NodeRef]
	view.Store(&[]*messages.NodeRef{early})
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1,
		Nodes: func() []*messages.NodeRef { return *view.Load() }}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	del := func(id string) *actor.Future {
		return system.Root.RequestFuture(shard, &messages.DeleteObject{ObjectId: id}, 10*time.Second)
	}
	// Every node in the first view has republished: a Delete of an id
	// nobody holds is NOT_FOUND.
	for end := time.Now().Add(10 * time.Second); ; {
		res, err := del("never-put").Result()
		if err != nil {
			t.Fatal(err)
		}
		if errors.Is(messages.ErrOrNil(res.(*messages.DeleteObjectReply).GetError()), messages.ErrNotFound) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a Delete of an id never Put: %v, want NOT_FOUND", res)
		}
		time.Sleep(5 * time.Millisecond)
	}
	view.Store(&[]*messages.NodeRef{early, late})
	system.Root.Send(shard, WatchStores{})
	type answer struct {
		res any
		err error
	}
	got := make(chan answer, 1)
	f := del("x")
	go func() {
		res, err := f.Result()
		got <- answer{res, err}
	}()
	select {
	case <-time.After(100 * time.Millisecond):
	case a := <-got:
		t.Fatalf("a Delete answered %v (%v) while a node that came into the view had not republished", a.res, a.err)
	}
	system.Root.Send(late.PID(), releaseRepublish{})
	a := <-got // the future's own timeout bounds it
	if a.err != nil {
		t.Fatal(a.err)
	}
	res := a.res
	r := res.(*messages.DeleteObjectReply)
	if r.GetError() != nil || !slices.ContainsFunc(r.GetDropped(), func(n *messages.NodeRef) bool { return n.GetNodeId() == "late" }) {
		t.Fatalf("Delete of x: error %v, dropped %v; want OK naming late's copy", r.GetError(), r.GetDropped())
	}
}
