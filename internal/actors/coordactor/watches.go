package coordactor

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// watchNode watches a participant's store node, whose end is the
// Reduction's NodeFailed.
func (c *Coordinator) watchNode(ctx actor.Context, n *messages.NodeRef) {
	pid := n.PID()
	key := actorutil.Key(pid)
	if _, ok := c.watched[key]; ok {
		return
	}
	c.watched[key] = n.GetNodeId()
	if c.cfg.WatchViaShard && ctx.Parent() != nil {
		ctx.Send(ctx.Parent(), &WatchNode{Node: n, Watcher: ctx.Self()})
		return
	}
	c.watchSelf(ctx, n)
}

// WatchSelf tells a coordinator that its shard could not watch Node for
// it: it watches the node itself.
type WatchSelf struct{ Node *messages.NodeRef }

// watchSelf is watchNode without the shard.
func (c *Coordinator) watchSelf(ctx actor.Context, n *messages.NodeRef) {
	pid := n.PID()
	ctx.Watch(pid)
	c.watching = append(c.watching, pid)
}

// WatchNode asks a coordinator's shard (its parent, in process) to pass
// it the Terminated of the shard's own watch of Node's store node (see
// ActorConfig.WatchViaShard).
type WatchNode struct {
	Node    *messages.NodeRef
	Watcher *actor.PID
}

// unwatchAll ends the coordinator's watches as it stops. Proto.Actor
// forgets a stopped actor's watches on neither side: without this, every
// participant's store node (a long-lived actor) kept one watcher entry
// per Reduce it took part in, for good. The Unwatches go unwatchDelay
// later, off the Reduce's path: sent as the coordinator stopped, right
// after its answer, they made the 1 KiB reduce to 8 on the testbed
// slower, 1.21-1.31 ms against 1.06-1.15 ms (3 runs each, interleaved),
// and the AllReduce 2.74-2.92 against 2.43-2.63 ms.
func (c *Coordinator) unwatchAll(ctx actor.Context) {
	if len(c.watching) == 0 {
		return
	}
	pids, self, system := c.watching, ctx.Self(), ctx.ActorSystem()
	c.watching = nil
	time.AfterFunc(unwatchDelay, func() {
		for _, pid := range pids {
			p, _ := system.ProcessRegistry.Get(pid)
			p.SendSystemMessage(pid, &actor.Unwatch{Watcher: self})
		}
	})
}

// unwatchDelay is how long after its stop a coordinator's watches end.
const unwatchDelay = 200 * time.Millisecond
