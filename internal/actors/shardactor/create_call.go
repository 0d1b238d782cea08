package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ServeCreate answers a CreateObject that arrived on the data plane
// (messages.ControlCreate: a Put's registration from another member): it
// asks the object's shard on this member with an actor request, as the
// creator's node would, and returns the encoded CreateObjectReply
// (serveShardRequest).
func ServeCreate(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	return serveShardRequest[*messages.CreateObjectReply](ctx, root, shardFor, req, &messages.CreateObject{})
}

// CallCreate asks the shard on the member whose data address is addr to
// register c, with a control request on the data plane (the other end is
// ServeCreate), and returns its decoded answer.
func CallCreate(ctx context.Context, caller transport.Caller, addr string, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
	return callShardRequest(ctx, caller, addr, messages.ControlCreate, c, &messages.CreateObjectReply{})
}

// RequestCreate asks the shard pid with an actor message and waits for
// its answer (a shard that stops before it answers is UNAVAILABLE at
// once).
func RequestCreate(ctx context.Context, root *actor.RootContext, pid *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
	res, err := actorutil.Request(ctx, root, pid, c)
	if err != nil {
		return nil, err
	}
	reply, ok := res.(*messages.CreateObjectReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a CreateObject with %T", pid.GetId(), res)
	}
	return reply, nil
}
