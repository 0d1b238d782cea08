package storeactor

import (
	"context"
	"errors"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// Deleter carries a Delete's DeleteObject to its shard on another member
// and returns the shard's answer, or why there is none; ErrAskAsActor
// says it cannot, and the node then asks the shard with an actor
// request. The cluster's goes on the data plane
// (internal/actors/shardactor.CallDelete).
type Deleter func(ctx context.Context, shard *actor.PID, d *messages.DeleteObject) (*messages.DeleteObjectReply, error)

// ErrAskAsActor is a Deleter's answer when the request cannot go its way
// (a member that does not serve the kind, or whose data address is not
// known yet).
var ErrAskAsActor = errors.New("ask the shard with an actor request")

// deleteAnswered is the answer to a DeleteObject that deleteElsewhere
// sent, or why there is none.
type deleteAnswered struct {
	del, rid uint64
	pid      *actor.PID
	msg      *messages.DeleteObject
	reply    *messages.DeleteObjectReply
	err      error
}

// deleteElsewhere sends a Delete's DeleteObject to a shard on another
// member through the node's Deleter (the data plane: one request and its
// answer, where an actor request and its reply crossed the actors'
// remote), on a goroutine of its own bounded by the Delete's deadline,
// and hands the answer back to the node (deleteAnswered). The node's
// records of its own copies that went to the shard on the actors'
// remote may arrive after it: the Deletion core drops the copy this node
// held at the start whether or not the shard named it (DropHeld).
func (n *StoreNode) deleteElsewhere(ctx actor.Context, did, rid uint64, pid *actor.PID, m *messages.DeleteObject) {
	del := n.cfg.Delete
	callBounded(ctx, n.reqs.deletes[did].del.Request().Deadline, func(cctx context.Context) any {
		r, err := del(cctx, pid, m)
		return deleteAnswered{del: did, rid: rid, pid: pid, msg: m, reply: r, err: err}
	})
}

// deleteAnsweredBack steps the Delete with deleteElsewhere's answer; one
// the Deleter could not carry goes as the actor request instead.
func (n *StoreNode) deleteAnsweredBack(ctx actor.Context, m deleteAnswered) {
	if _, ok := n.reqs.routes[m.rid]; !ok {
		return // its Delete is over
	}
	switch {
	case errors.Is(m.err, ErrAskAsActor):
		n.watch(ctx, m.pid)
		n.reqs.senders.Request(ctx, m.pid, m.msg)
	case m.err != nil:
		delete(n.reqs.routes, m.rid)
		n.deleteStep(ctx, m.del, storeproto.DeleteFailed{Err: shardCallError(m.err, m.msg.GetObjectId())})
	default:
		n.deleteReply(ctx, m.reply)
	}
}
