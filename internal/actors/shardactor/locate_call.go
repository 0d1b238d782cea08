package shardactor

import (
	"context"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// AbandonLocate withdraws the parked Locate whose reply was to go to
// ReplyTo (in process only: LocateHere sends it, naming its callReply,
// when its caller hangs up).
type AbandonLocate struct {
	ObjectID string
	ReplyTo  any
}

// servedLocate is a Locate handed by LocateHere to the object's shard on
// the same member (from a store node of this member, or from ServeLocate
// for another member's). It carries its reply channel rather than a
// future's PID: a future costs a registered process, a timer, and a
// Watch and an Unwatch of the shard (a second run of the shard's
// mailbox) on every small Get, which LocateHere does not need. It needs
// the watch for nothing: the shard answers every parked Locate
// UNAVAILABLE when it stops or restarts (Shard.stopping), LocateHere
// waits no longer than its caller's deadline, and the store node that
// asked watches the shard itself, which covers a Locate still in the
// mailbox of a shard that stopped.
type servedLocate struct {
	locate *messages.Locate
	reply  *callReply
}

// callReply is where a shard answers a servedLocate: every answer (the
// inline bytes, a sender to stream from, an error) goes back to the one
// call that waits on done. The answer that names a sender comes the same
// way: the store node that asked runs the fetch, and it also takes the
// shard's DropObject, so a drop that overtakes the answer ends that fetch
// there, and the late answer finds nothing to act on. A callReply is
// matched by identity (AbandonLocate).
type callReply struct {
	done chan any // buffered: the shard never waits on it
}

func (r *callReply) deliver(msg any) {
	select {
	case r.done <- msg:
	default: // answered already: the table answers a waiter once
	}
}

// ServeLocate answers a Locate that arrived on the data plane
// (messages.ControlLocate): it hands it to the object's shard on this
// member (LocateHere), and returns the encoded LocateReply. A shard that
// is not on this member (it moved) or not running is UNAVAILABLE, which
// the caller retries where its table now says. ctx must have a deadline.
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
	reply, err := LocateHere(ctx, root, pid, &l)
	if err != nil {
		return nil, err
	}
	b, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode LocateReply: %v", err)
	}
	return b, nil
}

// LocateHere asks the shard pid, which runs in this process, and waits
// for its answer, in process and without encoding it. The shard parks a
// Locate of an object that does not exist yet; if ctx ends first (the
// caller's deadline, or it hung up), that Locate is withdrawn. A shard
// that is not running is UNAVAILABLE. ctx must have a deadline.
func LocateHere(ctx context.Context, root *actor.RootContext, pid *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "Locate without a deadline")
	}
	if _, ok := root.ActorSystem().ProcessRegistry.Get(pid); !ok {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s is not running", pid.GetId())
	}
	if ctx.Err() != nil {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the Locate was sent")
	}
	if r := quickLocate(pid, l); r != nil {
		return r, nil // published: on the caller's goroutine
	}
	r := &callReply{done: make(chan any, 1)}
	root.Send(pid, servedLocate{locate: l, reply: r})
	var res any
	select {
	case res = <-r.done:
	case <-ctx.Done():
		select {
		case res = <-r.done: // an answer that came with the deadline still counts
		default:
			root.Send(pid, AbandonLocate{ObjectID: l.GetObjectId(), ReplyTo: r})
			if ctx.Err() == context.DeadlineExceeded {
				return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", pid.GetId())
			}
			return nil, messages.AsError(ctx.Err())
		}
	}
	reply, ok := res.(*messages.LocateReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a Locate with %T", pid.GetId(), res)
	}
	return reply, nil
}

// CallLocate asks the shard on the member whose data address is addr,
// with a control request on the data plane (the other end is
// ServeLocate), and returns its decoded answer. Hanging up (ctx ends)
// withdraws exactly this request at the shard.
func CallLocate(ctx context.Context, caller transport.Caller, addr string, l *messages.Locate) (*messages.LocateReply, error) {
	req, err := proto.Marshal(l)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode Locate: %v", err)
	}
	b, err := caller.Call(ctx, addr, messages.ControlLocate, req)
	if err != nil {
		return nil, err
	}
	reply, err := decodeLocateReply(b)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed LocateReply from %s: %v", addr, err)
	}
	return reply, nil
}

// CallLocateVia asks the shard of l's object through the Locate deputy
// whose data address is via (messages.ControlLocateVia: the member sends
// it on, alone or in a batch, or answers it if the shard is its own), and
// returns the decoded answer.
func CallLocateVia(ctx context.Context, caller transport.Caller, via string, l *messages.Locate) (*messages.LocateReply, error) {
	req, err := proto.Marshal(l)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode Locate: %v", err)
	}
	b, err := caller.Call(ctx, via, messages.ControlLocateVia, req)
	if err != nil {
		return nil, err
	}
	reply, err := decodeLocateReply(b)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed LocateReply from %s: %v", via, err)
	}
	return reply, nil
}

// RequestLocate asks the shard pid with an actor message and waits for
// its answer (actorutil.Request: a shard that stops before it answers is
// UNAVAILABLE at once). A shard withdraws such a Locate at its own
// timeout, which the Locate carries.
func RequestLocate(ctx context.Context, root *actor.RootContext, pid *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
	res, err := actorutil.Request(ctx, root, pid, l)
	if err != nil {
		return nil, err
	}
	reply, ok := res.(*messages.LocateReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "shard %s answered a Locate with %T", pid.GetId(), res)
	}
	return reply, nil
}
