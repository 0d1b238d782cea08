package shardactor

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A subscriber that stops without unsubscribing (a coordinator whose
// member died, a peer that went) is dropped from the shard's table: its
// subscriptions no longer count against the bound on one object's
// subscribers, and nothing else would have removed them.
func TestShardDropsASubscriberThatStopped(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{
		Table:    directory.TableConfig{MaxSubscribersPerObject: 1},
		Nodes:    func() []*messages.NodeRef { return nil },
		Failures: &FailureLog{},
	}), "shard-subscriber-watch-test")
	if err != nil {
		t.Fatal(err)
	}
	// updates spawns a subscriber of x and returns once the shard took
	// its Subscribe: the Subscribe is in the shard's mailbox before the
	// query that follows it.
	updates := func() (chan *messages.LocationUpdate, *actor.PID) {
		ch := make(chan *messages.LocationUpdate, 8)
		sent := make(chan struct{})
		pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *actor.Started:
				ctx.Request(shard, &messages.Subscribe{ObjectId: "x"})
				close(sent)
			case *messages.LocationUpdate:
				ch <- m
			}
		}))
		<-sent
		if _, err := system.Root.RequestFuture(shard, &messages.QueryObject{ObjectId: "x"}, 5*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
		return ch, pid
	}
	refused := func(ch chan *messages.LocationUpdate, within time.Duration) bool {
		select {
		case u := <-ch:
			return errors.Is(u.GetError(), messages.ErrResourceExhausted)
		case <-time.After(within):
			return false
		}
	}
	_, first := updates()
	// The bound holds while the first subscriber lives.
	second, secondPID := updates()
	if !refused(second, 5*time.Second) {
		t.Fatal("a second subscriber past MaxSubscribersPerObject was not refused")
	}
	system.Root.Stop(secondPID)
	if err := system.Root.StopFuture(first).Wait(); err != nil {
		t.Fatal(err)
	}
	end := time.Now().Add(10 * time.Second)
	for {
		third, thirdPID := updates()
		if !refused(third, 100*time.Millisecond) {
			return // the stopped subscriber's place is free
		}
		system.Root.Stop(thirdPID)
		if time.Now().After(end) {
			t.Fatal("a subscriber that stopped without unsubscribing still holds its subscription")
		}
	}
}
