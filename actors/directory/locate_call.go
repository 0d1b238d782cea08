package directory

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// AbandonLocate withdraws the parked Locate whose reply was to go to
// ReplyTo (in process only: ServeLocate sends it when its caller hangs
// up).
type AbandonLocate struct {
	ObjectID string
	ReplyTo  *actor.PID
}

// splitReply is where the answer to a Locate that came on the data plane
// goes: an inline answer or an error back on the data plane (to call, the
// request's future), an answer that names a sender to the fetch session
// as an actor message. The latter must not travel beside the shard's
// actor messages to the receiver's node: a DropObject (RESET: the Reduce
// re-created its target elsewhere; DELETED; LOST) sent after it would
// overtake it, and the session would then stream a copy the directory
// already dropped. The future is told locateForwarded.
type splitReply struct {
	call, session *actor.PID
}

// GetAddress and GetId name the request's future: AbandonLocate matches
// it.
func (r splitReply) GetAddress() string { return r.call.GetAddress() }

// GetId: see GetAddress.
func (r splitReply) GetId() string { return r.call.GetId() }

func (r splitReply) deliver(ctx actor.Context, msg any) {
	if l, ok := msg.(*messages.LocateReply); ok && !l.GetHasInline() && l.GetError() == nil {
		ctx.Send(r.session, l)
		msg = locateForwarded{}
	}
	ctx.Send(r.call, msg)
}

// locateForwarded tells ServeLocate that the answer went to the fetch
// session as an actor message.
type locateForwarded struct{}

// locateReplyTo is where a shard answers the Locate m from sender.
func locateReplyTo(sender *actor.PID, m *messages.Locate) any {
	if r := m.GetReplyTo(); r != nil && sender != nil && r.GetAddress() != "" && r.GetActorId() != "" {
		return splitReply{call: sender, session: r.PID()}
	}
	return sender
}

// ServeLocate answers a Locate that arrived on the data plane
// (messages.ControlLocate): it asks the object's shard on this member as
// a fetch session would, and returns the encoded LocateReply. The shard
// parks a Locate of an object that does not exist yet; if ctx ends
// first (the caller's deadline, or it hung up), that Locate is
// withdrawn. A shard that is not on this member (it moved) is
// UNAVAILABLE, which the caller retries where its table now says. An
// empty answer means the LocateReply went to the Locate's reply_to as an
// actor message (see splitReply).
func ServeLocate(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var l messages.Locate
	if err := proto.Unmarshal(req, &l); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed Locate on the data plane: %v", err)
	}
	id := l.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Locate without an object id")
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	res, err := actorutil.RequestOrAbandon(ctx, root, pid, &l, func(replyTo *actor.PID) {
		root.Send(pid, AbandonLocate{ObjectID: id, ReplyTo: replyTo})
	})
	if err != nil {
		return nil, err
	}
	if _, ok := res.(locateForwarded); ok {
		return []byte{}, nil
	}
	reply, ok := res.(*messages.LocateReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a Locate with %T", pid.GetId(), res)
	}
	b, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode LocateReply: %v", err)
	}
	return b, nil
}
