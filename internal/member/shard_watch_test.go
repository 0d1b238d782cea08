package member

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/testhooks"
)

// Every directory shard is told when the live store nodes change, so it
// watches a store node that joined after the shard started before that
// node's first Locate or copy there (a remote Watch inside the node's
// first small Get otherwise). Member 2 is killed and comes back as a new
// incarnation with a new store node: every shard placed afterwards,
// those that stayed on members 0 and 1 as well as those that started on
// member 2, gets a WatchStores from then on.
func TestShardsAreToldOfAStoreNodeThatJoins(t *testing.T) {
	var (
		mu    sync.Mutex
		since atomic.Bool
		told  = map[string]bool{} // shard actor ids told since the kill
	)
	l := start(t, Config{Nodes: 3, hooks: testhooks.Set{Shard: func(self string, msg any) {
		if _, ok := msg.(shardactor.WatchStores); ok && since.Load() {
			mu.Lock()
			told[self] = true
			mu.Unlock()
		}
	}}})
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	since.Store(true)
	if err := l.Restart(2); err != nil {
		t.Fatal(err)
	}
	stayed := 0
	eventually(t, 10*time.Second, "every shard told of the restarted member's store node", func() bool {
		mu.Lock()
		defer mu.Unlock()
		stayed = 0
		for j := range l.cfg.Shards {
			pid := l.Shard(j)
			if pid == nil || !told[pid.GetId()] {
				return false
			}
			if l.NodeOf(pid.GetAddress()) != 2 {
				stayed++
			}
		}
		return true
	})
	if stayed == 0 {
		t.Fatal("no shard stayed on members 0 and 1: the test checks nothing of a running shard")
	}
}
