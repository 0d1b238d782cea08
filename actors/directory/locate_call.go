package directory

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// AbandonLocate withdraws the parked Locate whose reply was to go to
// ReplyTo (in process only: ServeLocate sends it, naming its callReply,
// when its caller hangs up).
type AbandonLocate struct {
	ObjectID string
	ReplyTo  any
}

// servedLocate is a Locate that arrived on the data plane, handed by
// ServeLocate to the object's shard on the same member. It carries its
// reply channel rather than a future's PID: a future costs a registered
// process, a timer, and a Watch and an Unwatch of the shard (a second
// run of the shard's mailbox) on every small Get, which ServeLocate does
// not need. It needs the watch for nothing: the shard answers every
// parked Locate UNAVAILABLE when it stops or restarts (Shard.stopping),
// ServeLocate waits no longer than its caller's deadline, and the fetch
// session that sent the Locate watches the shard itself once the answer
// is late (watchDelay), which covers a Locate still in the mailbox of a
// shard that stopped.
type servedLocate struct {
	locate *messages.Locate
	reply  *callReply
}

// callReply is where a shard answers a servedLocate: an inline answer or
// an error back to ServeLocate (done), an answer that names a sender to
// the fetch session (session) as an actor message. The latter must not
// travel beside the shard's actor messages to the receiver's node: a
// DropObject (RESET: the Reduce re-created its target elsewhere; DELETED;
// LOST) sent after it would overtake it, and the session would then
// stream a copy the directory already dropped. ServeLocate is then told
// locateForwarded. A callReply is matched by identity (AbandonLocate).
type callReply struct {
	done    chan any // buffered: the shard never waits on it
	session *actor.PID
}

func (r *callReply) deliver(ctx actor.Context, msg any) {
	if l, ok := msg.(*messages.LocateReply); ok && r.session != nil && !l.GetHasInline() && l.GetError() == nil {
		ctx.Send(r.session, l)
		msg = locateForwarded{}
	}
	select {
	case r.done <- msg:
	default: // answered already: the table answers a waiter once
	}
}

// locateForwarded tells ServeLocate that the answer went to the fetch
// session as an actor message.
type locateForwarded struct{}

// ServeLocate answers a Locate that arrived on the data plane
// (messages.ControlLocate): it hands it to the object's shard on this
// member, and returns the encoded LocateReply. The shard parks a Locate
// of an object that does not exist yet; if ctx ends first (the caller's
// deadline, or it hung up), that Locate is withdrawn. A shard that is
// not on this member (it moved) or not running is UNAVAILABLE, which
// the caller retries where its table now says. An empty answer means
// the LocateReply went to the Locate's reply_to as an actor message (see
// callReply). ctx must have a deadline.
func ServeLocate(ctx context.Context, root *actor.RootContext, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var l messages.Locate
	if err := proto.Unmarshal(req, &l); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed Locate on the data plane: %v", err)
	}
	id := l.GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Locate without an object id")
	}
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "Locate on the data plane without a deadline")
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != root.ActorSystem().Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	if _, ok := root.ActorSystem().ProcessRegistry.Get(pid); !ok {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s is not running", pid.GetId())
	}
	if ctx.Err() != nil {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the Locate was sent")
	}
	r := &callReply{done: make(chan any, 1)}
	if rt := l.GetReplyTo(); rt.GetAddress() != "" && rt.GetActorId() != "" {
		r.session = rt.PID()
	}
	root.Send(pid, servedLocate{locate: &l, reply: r})
	var res any
	select {
	case res = <-r.done:
	case <-ctx.Done():
		select {
		case res = <-r.done: // an answer that came with the deadline still counts
		default:
			root.Send(pid, AbandonLocate{ObjectID: id, ReplyTo: r})
			if ctx.Err() == context.DeadlineExceeded {
				return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
			}
			return nil, messages.AsError(ctx.Err())
		}
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
