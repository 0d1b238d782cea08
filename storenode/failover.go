package storenode

import (
	"context"
	"errors"
	"time"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// Failover finds another store node when the request to failed ended
// UNAVAILABLE (the node, or its process, is gone). It returns the node to
// retry at, or an error when none answers within ctx.
type Failover func(ctx context.Context, failed *actor.PID) (*actor.PID, error)

// NewFailoverClient is NewClient with a failover: a Put, Get, GetInto,
// Delete, Info or Wait whose request to the node fails UNAVAILABLE
// moves to the node failover returns and is sent again there, within
// the call's deadline (they are idempotent: a Put of the same bytes
// succeeds again, or fails LOST if the node that died held the only
// copy). A Reduce is sent again only if it never reached the node (its
// actor system answered that the node is not running, or the request
// could not be sent); otherwise it fails UNAVAILABLE, because the Reduce
// may be running, and the next call goes to the new node.
func NewFailoverClient(root *actor.RootContext, pid *actor.PID, defaultTimeout time.Duration, failover Failover) *Client {
	c := NewClient(root, pid, defaultTimeout)
	c.failover = failover
	return c
}

// failedOver reports whether err, a failed request to the node, moved
// the client to another node to retry at.
func (c *Client) failedOver(ctx context.Context, err error) bool {
	if c.failover == nil || !errors.Is(err, messages.ErrUnavailable) || ctx.Err() != nil {
		return false
	}
	failed := c.PID()
	pid, ferr := c.failover(ctx, failed)
	if ferr != nil || pid == nil {
		return false
	}
	// Another call may have moved the client meanwhile: keep its choice.
	c.node.CompareAndSwap(failed, pid)
	return true
}

// neverReached reports whether err, the outcome of a request to node,
// says that the request never reached node's actor: its actor system
// answered that the actor is not running, or the request could not be
// sent to its process. Not a request lost with a process that died after
// it arrived: a Reduce may then be running.
func neverReached(err error, node *actor.PID) bool {
	if actorutil.IsNotRunning(err) {
		return true
	}
	var e *messages.Error
	return errors.As(err, &e) && messages.NeverReachedBy(e, node)
}

// MaxWaitObjects bounds the ids of one Wait (messages.WaitObjects).
const MaxWaitObjects = storeproto.MaxWaitObjects

// Wait returns when k of ids exist (as ray.wait): ready lists the ids
// that exist, at most k, in the order the node learned it; notReady the
// others, in the order given. At ctx's deadline it returns what exists
// then, without an error. An id that was deleted or lost never becomes
// ready; when too many such ids leave fewer than k possible, Wait returns
// at once. Errors: INVALID_ARGUMENT for k outside 1..len(ids), more than
// MaxWaitObjects ids, a repeated or invalid id.
func (c *Client) Wait(ctx context.Context, ids []string, k int) (ready, notReady []string, err error) {
	if err := CheckWait(ids, k); err != nil {
		return nil, nil, err
	}
	var r *messages.WaitObjectsReply
	err = c.retry(ctx, func(ctx context.Context) (bool, error) {
		node := c.PID()
		res, err := c.call(ctx, &messages.WaitObjects{ObjectIds: ids, NumReady: int32(k)})
		if err != nil {
			return false, err
		}
		var ok bool
		if r, ok = res.(*messages.WaitObjectsReply); !ok {
			return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %s to WaitObjects", actorutil.TypeName(res))
		}
		// A reply that says the node did not serve it is the node's end,
		// not a race (as for Put).
		return !messages.IsUndeliveredBy(r.GetError(), node), messages.ErrOrNil(r.GetError())
	})
	if err != nil {
		return nil, nil, err
	}
	return r.GetReady(), r.GetNotReady(), nil
}

// CheckWait checks a Wait's arguments, as a store node checks a
// WaitObjects (their ids' form aside).
func CheckWait(ids []string, k int) *messages.Error { return storeproto.CheckWait(ids, k) }

// shallowCopy is a new m whose fields share m's values (its bytes, its
// lists and messages), so that setting a scalar on it leaves m alone.
func shallowCopy(m proto.Message) proto.Message {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	return dst.Interface()
}
