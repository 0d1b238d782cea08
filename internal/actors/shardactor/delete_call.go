package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ServeDelete answers a DeleteObject that arrived on the data plane
// (messages.ControlDelete: a Delete from another member's store node):
// it asks the object's shard on this member with an actor request, as
// the deleting node would, and returns the encoded DeleteObjectReply. A
// shard that is not on this member (it moved) or not running is
// UNAVAILABLE. ctx must have a deadline.
func ServeDelete(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var d messages.DeleteObject
	if err := proto.Unmarshal(req, &d); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed DeleteObject on the data plane: %v", err)
	}
	id := d.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "DeleteObject without an object id")
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	res, err := actorutil.Request(ctx, root, pid, &d)
	if err != nil {
		return nil, err
	}
	reply, ok := res.(*messages.DeleteObjectReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a DeleteObject with %T", pid.GetId(), res)
	}
	b, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode DeleteObjectReply: %v", err)
	}
	return b, nil
}

// CallDelete asks the shard on the member whose data address is addr to
// delete d's object, with a control request on the data plane (the other
// end is ServeDelete), and returns its decoded answer.
func CallDelete(ctx context.Context, caller transport.Caller, addr string, d *messages.DeleteObject) (*messages.DeleteObjectReply, error) {
	req, err := proto.Marshal(d)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode DeleteObject: %v", err)
	}
	b, err := caller.Call(ctx, addr, messages.ControlDelete, req)
	if err != nil {
		return nil, err
	}
	var reply messages.DeleteObjectReply
	if err := proto.Unmarshal(b, &reply); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed DeleteObjectReply from %s: %v", addr, err)
	}
	return &reply, nil
}
