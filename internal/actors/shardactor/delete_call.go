package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ServeDelete answers a DeleteObject that arrived on the data plane
// (messages.ControlDelete: a Delete from another member's store node):
// it asks the object's shard on this member with an actor request, as
// the deleting node would, and returns the encoded DeleteObjectReply
// (serveShardRequest).
func ServeDelete(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	return serveShardRequest[*messages.DeleteObjectReply](ctx, root, shardFor, req, &messages.DeleteObject{})
}

// CallDelete asks the shard on the member whose data address is addr to
// delete d's object, with a control request on the data plane (the other
// end is ServeDelete), and returns its decoded answer.
func CallDelete(ctx context.Context, caller transport.Caller, addr string, d *messages.DeleteObject) (*messages.DeleteObjectReply, error) {
	return callShardRequest(ctx, caller, addr, messages.ControlDelete, d, &messages.DeleteObjectReply{})
}
