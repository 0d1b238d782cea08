package member

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// A small AllReduce's coordinator needs nothing more of a source once its
// bytes came: the sources' shards end its subscriptions with their
// answers (Subscribe.once_below), so no Unsubscribe goes to any of them,
// and no shard is left with a subscriber when the AllReduce has answered.
func TestSmallAllReduceLeavesNoSubscription(t *testing.T) {
	const nodes = 4
	var mu sync.Mutex
	seen := map[string]int{} // message type -> how many the shards received
	l := start(t, Config{Nodes: nodes, hooks: testhooks.Set{Shard: func(_ string, msg any) {
		switch msg.(type) {
		case *messages.Subscribe, *messages.Unsubscribe:
			mu.Lock()
			seen[fmt.Sprintf("%T", msg)]++
			mu.Unlock()
		}
	}}})
	ctx := deadline(t, 30*time.Second)
	src := make([]byte, 1<<10)
	for i := 0; i < len(src); i += 4 {
		binary.LittleEndian.PutUint32(src[i:], math.Float32bits(1))
	}
	var sources []string
	for k := range nodes {
		id := fmt.Sprintf("once-src-%d", k)
		if err := l.Client(k).Put(ctx, id, src); err != nil {
			t.Fatal(err)
		}
		sources = append(sources, id)
	}
	for round := range 3 {
		target := fmt.Sprintf("once-sum-%d", round)
		if _, err := l.Client(0).AllReduce(ctx, target, sources, nodes, messages.ReduceOp_SUM, messages.DType_FLOAT32); err != nil {
			t.Fatalf("allreduce into %s: %v", target, err)
		}
	}
	subscribers := 0
	for j := range nodes {
		pid := l.Shard(j)
		res, err := l.Member(l.NodeOf(pid.GetAddress())).System().Root.RequestFuture(pid, shardactor.CountObjects{}, 5*time.Second).Result()
		if err != nil {
			t.Fatalf("counting shard %d's subscribers: %v", j, err)
		}
		subscribers += res.(shardactor.ObjectCount).Subscribers
	}
	mu.Lock()
	defer mu.Unlock()
	// Subscribes on the data plane reach the shards as another message
	// (see shardactor.ServeSubscribe): count only what came as one.
	if seen["*messages.Unsubscribe"] != 0 || subscribers != 0 {
		t.Fatalf("the shards received %v and hold %d subscribers after three AllReduces; want no Unsubscribe and none", seen, subscribers)
	}
}
