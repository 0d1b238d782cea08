package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// objectRequest is a request to a directory shard that names its object.
type objectRequest interface {
	proto.Message
	GetObjectId() string
}

// serveShardRequest is the body of a data-plane request that a member
// hands to the object's shard on it as an actor request (ServeCreate,
// ServeDelete): it decodes req into m, asks the shard, and returns the
// encoded answer, which must be a Rep. A request that does not decode or
// names no object is INVALID_ARGUMENT; a shard that is not on this member
// (it moved) or not running is UNAVAILABLE. ctx must have a deadline.
// The shard is watched only once its answer is late
// (actorutil.RequestWatchingLate): many callers' requests share it.
func serveShardRequest[Rep proto.Message](ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte, m objectRequest) ([]byte, error) {
	what := string(m.ProtoReflect().Descriptor().Name())
	if err := proto.Unmarshal(req, m); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed %s on the data plane: %v", what, err)
	}
	id := m.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%s without an object id", what)
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	res, err := actorutil.RequestWatchingLate(ctx, root, pid, m)
	if err != nil {
		return nil, err
	}
	reply, ok := res.(Rep)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a %s with %T", pid.GetId(), what, res)
	}
	b, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode %T: %v", reply, err)
	}
	return b, nil
}

// callShardRequest sends m as a control request of kind to the member
// whose data address is addr, and decodes its answer into reply.
func callShardRequest[Rep proto.Message](ctx context.Context, caller transport.Caller, addr string, kind byte, m proto.Message, reply Rep) (Rep, error) {
	var none Rep
	req, err := proto.Marshal(m)
	if err != nil {
		return none, messages.Errorf(messages.ErrorCode_INTERNAL, "encode %T: %v", m, err)
	}
	b, err := caller.Call(ctx, addr, kind, req)
	if err != nil {
		return none, err
	}
	if err := proto.Unmarshal(b, reply); err != nil {
		return none, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed %T from %s: %v", reply, addr, err)
	}
	return reply, nil
}
