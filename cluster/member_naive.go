package cluster

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/storenode"
)

// UseNaive turns this member into the naive baseline, like the embedded
// cluster's Config.Naive: its Gets fetch from the creator and its Reduces
// gather every source at the caller. It restarts the store node actor
// (same name, same Store) with the naive switch; call it right after
// Join, before the member holds or fetches anything (`hoplite node
// -naive` does): requests that reach the store node while it restarts are
// lost.
//
// It exists because MemberConfig has no Naive field; the store node's
// configuration below must stay the one start() builds.
func (m *Member) UseNaive() error {
	node := m.node.Load()
	store := m.storePID.Load()
	if node == nil || store == nil {
		return fmt.Errorf("member %s is not running", m.id)
	}
	if err := m.system.Root.StopFuture(store).Wait(); err != nil {
		return fmt.Errorf("stop the store node: %w", err)
	}
	cfg := m.cfg
	props := storenode.NewProps(storenode.Config{
		Self: m.ref, Store: m.store, ShardFor: m.shardFor,
		Transport: &watchedTransport{Transport: m.tcp, report: m.suspectData},
		ChunkSize: cfg.ChunkSize, InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout,
		StallTimeout: cfg.StallTimeout, Naive: true, Hooks: cfg.Hooks, Log: m.log, Estimator: m.estimator,
	})
	res, err := m.system.Root.RequestFuture(node, hostChild{child{name: storeName, props: props}}, 10*time.Second).Result()
	if err != nil {
		return fmt.Errorf("restart the store node: %w", err)
	}
	pid, ok := res.(*actor.PID)
	if !ok {
		return fmt.Errorf("restart the store node: %v", res)
	}
	if pid.GetId() != store.GetId() {
		return fmt.Errorf("the store node restarted as %s, not %s", pid.GetId(), store.GetId())
	}
	return nil
}
