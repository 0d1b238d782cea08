package shardactor

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A member that leaves asks the shards that moved off it, still
// rebuilding, whether its copies were the last. A rebuilt shard that
// answered from what it had heard so far told it "lost" of an object
// another store node held, whose publication was still on the way
// (TestProcessGracefulLeave: "2 objects lost", and the directory then
// failed Gets of an object that exists). It answers UNAVAILABLE until
// every store node it asked to republish has said RepublishDone.
func TestRebuiltShardAnswersReportLostOnlyOnceEveryStoreRepublished(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	const size = 1 << 20
	// A store node stand-in: on Republish it publishes its copies to the
	// asker and, unless held, answers RepublishDone; a held one does both
	// when it receives release{}.
	type release struct{}
	fakeStore := func(name string, objects []string, hold bool) *messages.NodeRef {
		var self *messages.NodeRef
		var asker *actor.PID
		answer := func(ctx actor.Context) {
			for _, id := range objects {
				ctx.Send(asker, &messages.PublishLocation{ObjectId: id, Node: self, State: messages.LocationState_COMPLETE, Size: size})
			}
			ctx.Send(asker, &messages.RepublishDone{Node: self})
		}
		pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
			switch ctx.Message().(type) {
			case *messages.Republish:
				asker = ctx.Sender()
				if !hold {
					answer(ctx)
				}
			case release:
				answer(ctx)
			}
		}), name)
		if err != nil {
			t.Fatal(err)
		}
		self = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId(), DataAddress: "mem://" + name}
		return self
	}
	leaver := fakeStore("leaver", []string{"only", "shared"}, false)
	other := fakeStore("other", []string{"shared"}, true)
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: true,
		Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{leaver, other} }}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	reportLost := func(id string) *messages.ReportLostReply {
		t.Helper()
		res, err := system.Root.RequestFuture(shard, &messages.ReportLost{ObjectId: id, Node: leaver}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*messages.ReportLostReply)
	}
	// The leaver's copies are known: the shard heard from it.
	end := time.Now().Add(10 * time.Second)
	for {
		res, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if res.(ObjectCount).Objects == 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the shard never learned the leaver's copies")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// "other" has not republished: nobody can say yet whether "shared" is lost.
	r := reportLost("shared")
	if r.GetLost() || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrUnavailable) {
		t.Fatalf("ReportLost(shared) while a store node had not republished: lost %v, error %v; want UNAVAILABLE", r.GetLost(), r.GetError())
	}
	system.Root.Send(other.PID(), release{})
	end = time.Now().Add(10 * time.Second)
	for {
		r = reportLost("shared")
		if !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrUnavailable) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("still UNAVAILABLE after every store node republished: %v", r.GetError())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if r.GetError() != nil || r.GetLost() {
		t.Fatalf("ReportLost(shared) with another complete copy: lost %v, error %v; want not lost", r.GetLost(), r.GetError())
	}
	if r := reportLost("only"); r.GetError() != nil || !r.GetLost() {
		t.Fatalf("ReportLost(only), the last copy: lost %v, error %v; want lost", r.GetLost(), r.GetError())
	}
}

// A rebuilt shard answers a subscriber that located an object before and
// finds no copy of it (its copies went before the shard started over,
// and its lost mark with the old shard) with LOST, but only once every
// store node has republished: until then a copy may still come, so a
// resubscription meanwhile only subscribes.
func TestRebuiltShardAnswersLocatedBeforeSubscriptionsOnceEveryStoreRepublished(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	type release struct{}
	var store *messages.NodeRef
	var asker *actor.PID
	spid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *messages.Republish:
			asker = ctx.Sender()
		case release:
			ctx.Send(asker, &messages.RepublishDone{Node: store})
		}
	}), "held-store")
	if err != nil {
		t.Fatal(err)
	}
	store = &messages.NodeRef{NodeId: "held-store", Address: spid.GetAddress(), ActorId: spid.GetId(), DataAddress: "mem://held-store"}
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: true,
		Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{store} }}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	type ping struct{}
	updates := make(chan *messages.LocationUpdate, 16)
	sub, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.LocationUpdate:
			updates <- m
		case ping:
			ctx.Respond(m)
		}
	}), "subscriber")
	if err != nil {
		t.Fatal(err)
	}
	pending := func() int {
		t.Helper()
		res, err := system.Root.RequestFuture(shard, RebuildQuery{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(RebuildStatus).Pending
	}
	if n := pending(); n != 1 {
		t.Fatalf("rebuild pending %d, want the held store node", n)
	}
	subscribe := func() {
		system.Root.RequestWithCustomSender(shard, &messages.Subscribe{ObjectId: "src", LocatedBefore: true}, sub)
	}
	subscribe()
	// The shard takes one sender's messages in order: once it answers
	// this query it has handled the subscription, and once the
	// subscriber answers a ping it has taken what the shard sent it.
	if n := pending(); n != 1 {
		t.Fatalf("rebuild pending %d after the subscription, want 1", n)
	}
	if _, err := system.Root.RequestFuture(sub, ping{}, 5*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	select {
	case u := <-updates:
		t.Fatalf("subscription while a store node had not republished: %v, want nothing yet", u)
	default:
	}
	system.Root.Send(spid, release{})
	for end := time.Now().Add(10 * time.Second); pending() != 0; {
		if time.Now().After(end) {
			t.Fatal("the store node's RepublishDone never counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	subscribe()
	select {
	case u := <-updates:
		if !errors.Is(messages.ErrOrNil(u.GetError()), messages.ErrLost) {
			t.Fatalf("resubscription after the rebuild: %v, want LOST", u)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("resubscription after the rebuild: no answer")
	}
}

// fakeRepublisher is a store node stand-in: on Republish it sends the
// asker pubs, then RepublishDone unless held; a held one does both when
// it receives releaseRepublish{}.
type releaseRepublish struct{}

func fakeRepublisher(t *testing.T, system *actor.ActorSystem, name string, hold bool, pubs func(self *messages.NodeRef) []*messages.PublishLocation) *messages.NodeRef {
	t.Helper()
	var self *messages.NodeRef
	var asker *actor.PID
	released := !hold
	answer := func(ctx actor.Context) {
		for _, p := range pubs(self) {
			ctx.Send(asker, p)
		}
		ctx.Send(asker, &messages.RepublishDone{Node: self})
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		switch ctx.Message().(type) {
		case *messages.Republish:
			asker = ctx.Sender()
			if released {
				answer(ctx)
			}
		case releaseRepublish:
			released = true
			if asker != nil {
				answer(ctx)
			}
		}
	}), name)
	if err != nil {
		t.Fatal(err)
	}
	self = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId(), DataAddress: "mem://" + name}
	return self
}

// A store node slower to republish than RepublishWait still holds copies
// the rebuilt shard has not heard of: "lost" is not answered until it
// has republished (or failed), however long that takes. The shard
// answered ReportLost from what it had once RepublishWait had passed, and
// told a leaving member its copy of an object another node held was the
// last.
func TestRebuiltShardNeverAnswersLostBeforeEveryStoreRepublished(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	complete := func(id string) func(*messages.NodeRef) []*messages.PublishLocation {
		return func(self *messages.NodeRef) []*messages.PublishLocation {
			return []*messages.PublishLocation{{ObjectId: id, Node: self, State: messages.LocationState_COMPLETE, Size: 1 << 20}}
		}
	}
	leaver := fakeRepublisher(t, system, "leaver", false, complete("shared"))
	slow := fakeRepublisher(t, system, "slow", true, complete("shared"))
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: true, RepublishWait: time.Nanosecond,
		Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{leaver, slow} }}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(10 * time.Second); ; {
		res, err := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if res.(ObjectCount).Objects == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("the shard never learned the leaver's copy")
		}
		time.Sleep(5 * time.Millisecond)
	}
	res, err := system.Root.RequestFuture(shard, &messages.ReportLost{ObjectId: "shared", Node: leaver}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.ReportLostReply); r.GetLost() || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrUnavailable) {
		t.Fatalf("ReportLost(shared) past RepublishWait while a store node had not republished: lost %v, error %v; want UNAVAILABLE", r.GetLost(), r.GetError())
	}
}

// Once every store node has republished, an object the rebuilt shard
// knows only from a receiver's partial copy (its sender died with the
// shard's old host) can never be read whole: a Get parked on it hears
// LOST then, not TIMEOUT at its deadline.
func TestRebuiltShardAnswersLostForAnObjectWithOnlyPartialCopiesOnceRepublished(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	store := fakeRepublisher(t, system, "receiver", true, func(self *messages.NodeRef) []*messages.PublishLocation {
		return []*messages.PublishLocation{{ObjectId: "orphan", Node: self, State: messages.LocationState_PARTIAL, Size: 1 << 20}}
	})
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{Index: 0, Count: 1, Rebuilt: true,
		Nodes: func() []*messages.NodeRef { return []*messages.NodeRef{store} }}), "shard-0")
	if err != nil {
		t.Fatal(err)
	}
	getter, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(actor.Context) {}), "getter")
	if err != nil {
		t.Fatal(err)
	}
	get := system.Root.RequestFuture(shard, &messages.Locate{ObjectId: "orphan", TimeoutMs: 30_000,
		Receiver: &messages.NodeRef{NodeId: "getter", Address: getter.GetAddress(), ActorId: getter.GetId()}}, 20*time.Second)
	system.Root.Send(store.PID(), releaseRepublish{})
	res, err := get.Result()
	if err != nil {
		t.Fatalf("the parked Get: %v, want an answer", err)
	}
	if r := res.(*messages.LocateReply); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrLost) {
		t.Fatalf("the parked Get of the orphan: %v, want LOST", r)
	}
}
