package member

import (
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// stopUntilGone stops a node supervisor and waits until it and every
// actor under it are gone. A stop request to the supervisor alone is not
// enough, because of two ways Proto.Actor lets an actor outlive it:
//   - a child whose backoff restart (it crashed just before) comes in
//     while it stops is restarted instead (handleRestart does not look
//     whether the actor is stopping);
//   - an actor that is stopping still handles user messages while it
//     waits for its children, and a child it spawns then (a store node's
//     reduce worker for a task that just came) is never told to stop.
//
// Either keeps the node from stopping, and its local watchers never hear
// of it. So the node's actors are told to stop, again, until the
// supervisor is gone; an actor that already stops ignores it. Every
// actor under the supervisor is told every 50 ms from 500 ms on (finding
// them scans the system's process registry). The wait is bounded by
// Proto.Actor's stop timeout (10 s).
func stopUntilGone(system *actor.ActorSystem, sup *actor.PID) error {
	stopped := make(chan error, 1)
	fut := system.Root.StopFuture(sup)
	go func() { stopped <- fut.Wait() }()
	again := time.NewTicker(50 * time.Millisecond)
	defer again.Stop()
	for n := 1; ; n++ {
		select {
		case err := <-stopped:
			return err
		case <-again.C:
			if n < 10 {
				continue
			}
			for _, pid := range actorsUnder(system, sup) {
				system.Root.Stop(pid)
			}
		}
	}
}

// actorsUnder lists the running actors below sup (a child's id is its
// parent's id, a slash and its own name).
func actorsUnder(system *actor.ActorSystem, sup *actor.PID) []*actor.PID {
	prefix := sup.GetId() + "/"
	var out []*actor.PID
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		// IterCb, not Keys: Keys starts a goroutine per map shard.
		bucket.IterCb(func(id string, _ any) {
			if strings.HasPrefix(id, prefix) {
				out = append(out, actor.NewPID(sup.GetAddress(), id))
			}
		})
	}
	return out
}
