package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ServeCreate answers a CreateObject that arrived on the data plane
// (messages.ControlCreate: a fast Put's registration from another
// member): it asks the object's shard on this member with an actor
// request, as the creator's node would, and returns the encoded
// CreateObjectReply. A shard that is not on this member (it moved) or
// not running is UNAVAILABLE. ctx must have a deadline.
func ServeCreate(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var c messages.CreateObject
	if err := proto.Unmarshal(req, &c); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed CreateObject on the data plane: %v", err)
	}
	id := c.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "CreateObject without an object id")
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	res, err := actorutil.Request(ctx, root, pid, &c)
	if err != nil {
		return nil, err
	}
	reply, ok := res.(*messages.CreateObjectReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a CreateObject with %T", pid.GetId(), res)
	}
	b, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode CreateObjectReply: %v", err)
	}
	return b, nil
}

// CallCreate asks the shard on the member whose data address is addr to
// register c, with a control request on the data plane (the other end is
// ServeCreate), and returns its decoded answer.
func CallCreate(ctx context.Context, caller transport.Caller, addr string, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
	req, err := proto.Marshal(c)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode CreateObject: %v", err)
	}
	b, err := caller.Call(ctx, addr, messages.ControlCreate, req)
	if err != nil {
		return nil, err
	}
	var reply messages.CreateObjectReply
	if err := proto.Unmarshal(b, &reply); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed CreateObjectReply from %s: %v", addr, err)
	}
	return &reply, nil
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
