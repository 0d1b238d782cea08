package storeactor

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// An object's creator is killed while a receiver streams it, so the
// object's shard holds it in doubt (the receiver's copy may be whole);
// the creator's member rejoins at once and takes the shard back at its
// first placement, whose table is not amnesic. The new table asked the
// former host's store node (the Keeper) to republish before the former
// table stopped, so it never heard of the object, and answered a Delete
// of it NOT_FOUND (network nemesis seeds 560060, 570004, 570115). The
// Keeper now holds that answer until the former table hands over its
// doubts, or tells the new table to be amnesic if it never does.
func TestRepublicationWaitsForTheFormerTablesHandover(t *testing.T) {
	for _, tc := range []struct {
		name     string
		handover bool // the former table stops (its member saw the move)
	}{{"handed over", true}, {"never handed over", false}} {
		t.Run(tc.name, func(t *testing.T) {
			system := putQuietSystem(t)
			log := logrus.New()
			log.SetOutput(io.Discard)
			keeper := &messages.NodeRef{NodeId: "keeper", Address: system.Address(), ActorId: "keeper"}
			cfg := Config{Self: keeper, Store: objstore.NewStore(1 << 20), ShardFor: func(string) *actor.PID { return nil },
				HandoverWait: 300 * time.Millisecond, Log: logrus.NewEntry(log)}
			if _, err := system.Root.SpawnNamed(NewProps(cfg), "keeper"); err != nil {
				t.Fatal(err)
			}
			ignore := actor.PropsFromFunc(func(actor.Context) {})
			creator, err := system.Root.SpawnNamed(ignore, "creator")
			if err != nil {
				t.Fatal(err)
			}
			receiver, err := system.Root.SpawnNamed(ignore, "receiver")
			if err != nil {
				t.Fatal(err)
			}
			ref := func(pid *actor.PID) *messages.NodeRef {
				return &messages.NodeRef{NodeId: pid.GetId(), Address: pid.GetAddress(), ActorId: pid.GetId(), DataAddress: "mem://" + pid.GetId()}
			}
			nodes := func() []*messages.NodeRef { return []*messages.NodeRef{keeper} }
			request := func(to *actor.PID, msg any) any {
				t.Helper()
				res, err := system.Root.RequestFuture(to, msg, 10*time.Second).Result()
				if err != nil {
					t.Fatalf("%T: %v", msg, err)
				}
				return res
			}

			former, err := system.Root.SpawnNamed(shardactor.NewShardProps(shardactor.ShardConfig{Index: 0, Count: 1, Keeper: keeper, Nodes: nodes,
				Table: directory.TableConfig{LossGrace: time.Minute}}), "former/shard-0")
			if err != nil {
				t.Fatal(err)
			}
			system.Root.Send(former, &messages.PublishLocation{ObjectId: "x", Node: ref(creator), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
			reply := request(former, &messages.Locate{ObjectId: "x", Receiver: ref(receiver), TimeoutMs: 5000}).(*messages.LocateReply)
			if reply.GetSender().GetNodeId() != "creator" {
				t.Fatalf("the receiver was sent to %v, want the creator", reply)
			}
			system.Root.Stop(creator) // killed mid-stream: the receiver's copy may be whole
			for end := time.Now().Add(10 * time.Second); ; {
				info := request(former, &messages.QueryObject{ObjectId: "x"}).(*messages.ObjectInfo)
				if len(info.GetLocations()) == 1 && info.GetLocations()[0].GetNode().GetNodeId() == "receiver" {
					break // the creator's copy went; the receiver's is in doubt
				}
				if time.Now().After(end) {
					t.Fatalf("the former table never saw the creator go: %v", info)
				}
				time.Sleep(5 * time.Millisecond)
			}

			// The creator's member rejoins and takes the shard back.
			next, err := system.Root.SpawnNamed(shardactor.NewShardProps(shardactor.ShardConfig{Index: 0, Count: 1, Nodes: nodes}), "rejoined/shard-0")
			if err != nil {
				t.Fatal(err)
			}
			// Its Republish reaches the Keeper before the former table
			// stops: the new table has started once it answers, and the
			// Keeper has taken the request once it answers after it.
			request(next, shardactor.RebuildQuery{})
			request(keeper.PID(), &messages.NodeStatus{})
			deleted := system.Root.RequestFuture(next, &messages.DeleteObject{ObjectId: "x"}, 10*time.Second)
			if tc.handover {
				if err := system.Root.StopFuture(former).Wait(); err != nil {
					t.Fatal(err)
				}
			}
			res, err := deleted.Result()
			if err != nil {
				t.Fatal(err)
			}
			if err := messages.ErrOrNil(res.(*messages.DeleteObjectReply).GetError()); err != nil {
				t.Fatalf("Delete of an object Put and lost with its creator: %v, want OK", err)
			}
			err = messages.ErrOrNil(request(next, &messages.DeleteObject{ObjectId: "never"}).(*messages.DeleteObjectReply).GetError())
			if tc.handover && !errors.Is(err, messages.ErrNotFound) {
				t.Fatalf("Delete of an id never Put, after the hand-over: %v, want NOT_FOUND", err)
			}
			if !tc.handover && err != nil {
				t.Fatalf("Delete of an id never Put by a table that missed the hand-over (amnesic): %v, want OK", err)
			}
		})
	}
}

// A table that asks again while its request waits for a hand-over joins
// that wait (one RepublishDone answers both), and past maxHeldRepublish
// held requests a new asker is answered at once, told to be amnesic:
// requests from the network hold no unbounded set of timers.
func TestRepeatedRepublicationsShareOneHold(t *testing.T) {
	system := putQuietSystem(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	keeper := &messages.NodeRef{NodeId: "keeper", Address: system.Address(), ActorId: "keeper"}
	cfg := Config{Self: keeper, Store: objstore.NewStore(1 << 20), ShardFor: func(string) *actor.PID { return nil },
		HandoverWait: time.Minute, Log: logrus.NewEntry(log)}
	if _, err := system.Root.SpawnNamed(NewProps(cfg), "keeper"); err != nil {
		t.Fatal(err)
	}
	type heard struct{ done, amnesic int }
	counts := make(chan heard, 1)
	counts <- heard{}
	counter := func() *actor.Props {
		return actor.PropsFromFunc(func(c actor.Context) {
			h := <-counts
			switch m := c.Message().(type) {
			case *messages.RepublishDone:
				h.done++
			case *messages.Tombstones:
				if m.GetAmnesic() {
					h.amnesic++
				}
			}
			counts <- h
		})
	}
	read := func() heard { h := <-counts; counts <- h; return h }
	sync := func() {
		t.Helper()
		if _, err := system.Root.RequestFuture(keeper.PID(), &messages.NodeStatus{}, 10*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
	}
	former := actor.NewPID(system.Address(), "former/shard-0")
	system.Root.Send(keeper.PID(), shardactor.TableOpened{Shard: 0, Table: former})
	asker, err := system.Root.SpawnNamed(counter(), "asker")
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		system.Root.RequestWithCustomSender(keeper.PID(), &messages.Republish{Shards: []int32{0}, ShardCount: 1}, asker)
	}
	sync()
	if h := read(); h.done != 0 {
		t.Fatalf("answered before the hand-over: %+v", h)
	}
	system.Root.Send(keeper.PID(), shardactor.TableHandedOver{Shard: 0, Table: former})
	sync()
	for end := time.Now().Add(10 * time.Second); read().done == 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	sync()
	if h := read(); h.done != 1 || h.amnesic != 0 {
		t.Fatalf("20 asks while held, then the hand-over: %+v, want one RepublishDone and no amnesia", h)
	}

	// Fill the held requests with other askers (never answered), then
	// one more asker is answered at once.
	system.Root.Send(keeper.PID(), shardactor.TableOpened{Shard: 0, Table: former})
	for i := range maxHeldRepublish {
		system.Root.RequestWithCustomSender(keeper.PID(), &messages.Republish{Shards: []int32{0}, ShardCount: 1},
			actor.NewPID(system.Address(), fmt.Sprintf("gone-%d", i)))
	}
	<-counts
	counts <- heard{} // the second asker's counts from here
	late, err := system.Root.SpawnNamed(counter(), "late")
	if err != nil {
		t.Fatal(err)
	}
	system.Root.RequestWithCustomSender(keeper.PID(), &messages.Republish{Shards: []int32{0}, ShardCount: 1}, late)
	sync()
	for end := time.Now().Add(10 * time.Second); read().done == 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if h := read(); h.done != 1 || h.amnesic != 1 {
		t.Fatalf("an asker past %d held requests: %+v, want answered at once, amnesic", maxHeldRepublish, h)
	}
}
