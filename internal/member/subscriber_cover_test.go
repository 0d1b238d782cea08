package member

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// TestSubscriptionsOfARemoteCoordinatorEnd: a Reduce coordinator on
// another member than its sources' shard subscribes there without a watch
// of its own (the shard's watch of that member's store node stands for
// it), and its subscription still ends both ways: when the Reduce ends
// (its Unsubscribe), and when its member is killed mid-Reduce (the store
// node's watch ends), so that no shard keeps a dead coordinator's
// subscriptions.
func TestSubscriptionsOfARemoteCoordinatorEnd(t *testing.T) {
	const nodes, shards = 3, 12 // every member hosts some shards
	l := start(t, Config{Nodes: nodes, Shards: shards})
	ctx := deadline(t, time.Minute)
	// on is an id whose shard runs on node k.
	on := func(prefix string, k int) string {
		return benchIDs(t, 1, prefix, func(id string) bool {
			return l.NodeOf(l.Shard(directory.ShardIndex(id, shards)).GetAddress()) == k
		})[0]
	}
	src := on("cover-src", 0)
	// subscribers counts the subscribers at src's shard, asked from the
	// member it runs on (CountObjects is an in-process message).
	subscribers := func() int {
		pid := l.Shard(directory.ShardIndex(src, shards))
		host := l.NodeOf(pid.GetAddress())
		if host < 0 {
			return -1
		}
		res, err := l.Member(host).System().Root.RequestFuture(pid, shardactor.CountObjects{}, 5*time.Second).Result()
		if err != nil {
			t.Logf("counting the shard's subscribers: %v", err)
			return -1
		}
		return res.(shardactor.ObjectCount).Subscribers
	}
	if n := subscribers(); n != 0 {
		t.Fatalf("%d subscribers before any Reduce", n)
	}
	reduce := func(round int, timeout time.Duration) chan error {
		done := make(chan error, 1)
		target := on("cover-sum-"+string(rune('a'+round)), 2)
		go func() {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			// src is never Put: the coordinator waits for it, subscribed.
			_, err := l.Client(2).Reduce(rctx, target, []string{src}, 1, messages.ReduceOp_SUM, messages.DType_FLOAT32)
			done <- err
		}()
		return done
	}
	done := reduce(0, 2*time.Second)
	eventually(t, 10*time.Second, "the coordinator on node 2 subscribes at node 0's shard", func() bool { return subscribers() == 1 })
	if err := <-done; err == nil {
		t.Fatal("a Reduce of a source nobody Puts succeeded")
	}
	eventually(t, 10*time.Second, "the ended Reduce's subscription ends", func() bool { return subscribers() == 0 })

	done = reduce(1, 30*time.Second)
	eventually(t, 10*time.Second, "the second coordinator subscribes", func() bool { return subscribers() == 1 })
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the killed member's coordinator's subscription ends", func() bool { return subscribers() == 0 })
	<-done
}
