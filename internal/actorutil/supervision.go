package actorutil

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Supervision is the strategy a member's supervisor gives its store node
// and shards: a child that panics is restarted alone, after 10 ms times
// the failures it had in a row (a failure more than 10 s after the last
// starts the count again). A restart keeps the actor's PID, so its peers
// need not learn a new one; the Store keeps the node's objects, and a
// shard rebuilds its state from the store nodes.
func Supervision() actor.SupervisorStrategy {
	return actor.NewExponentialBackoffStrategy(10*time.Second, 10*time.Millisecond)
}
