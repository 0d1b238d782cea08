package storenode

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/localput"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/messages"
)

// Client is the Go API of one store node: what an application that is not
// itself an actor calls. Every call honours its context's deadline (and a
// default when the context has none) and returns typed errors that match
// the messages.Err* sentinels under errors.Is.
type Client struct {
	root           *actor.RootContext
	node           atomic.Pointer[actor.PID]
	defaultTimeout time.Duration
	failover       Failover // nil: calls stay with node
	data           DataPath // nil: bytes ride inside the requests
}

// NewClient returns a client of the store node at pid. defaultTimeout
// bounds calls whose context has no deadline.
func NewClient(root *actor.RootContext, pid *actor.PID, defaultTimeout time.Duration) *Client {
	if defaultTimeout <= 0 {
		defaultTimeout = 30 * time.Second
	}
	c := &Client{root: root, defaultTimeout: defaultTimeout}
	c.node.Store(pid)
	return c
}

// PID is the store node this client talks to.
func (c *Client) PID() *actor.PID { return c.node.Load() }

// withDeadline gives ctx the client's default deadline if it has none.
func (c *Client) withDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.defaultTimeout)
}

// retryBackoff bounds the waits between retries of a placement race.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = 200 * time.Millisecond
)

// retry runs op until it succeeds, fails otherwise than with a placement
// race, or ctx's deadline comes near. A race is an UNAVAILABLE answer of
// the store node itself (it is alive and asked the directory shard, which
// was moving to its new owner or restarting); op reports it as raced. An
// UNAVAILABLE of the request to the store node (the node is gone: no
// reply came, or one that says the node did not serve it,
// messages.IsUndeliveredBy) is not retried: it would only turn into a
// TIMEOUT. (One that names the shard a node handed a QueryObject to is a
// race: the shard's member died, and its new home answers.) Put, Get,
// Delete and Info are idempotent, so retrying them is safe. A Reduce is not retried
// here: the caller's store node starts it again itself, under the same
// call id, when its coordinator stops with the target's shard.
func (c *Client) retry(ctx context.Context, op func(ctx context.Context) (raced bool, err error)) error {
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	wait := retryFirst
	for {
		raced, err := op(ctx)
		if !raced && c.failedOver(ctx, err) {
			continue
		}
		if !raced || !errors.Is(err, messages.ErrUnavailable) {
			return err
		}
		if deadline, _ := ctx.Deadline(); time.Until(deadline) < 2*wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
		wait = min(2*wait, retryMax)
	}
}

func (c *Client) call(ctx context.Context, msg any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.defaultTimeout)
		defer cancel()
	}
	// A copy to set the timeout on: a retry must not write the message
	// that an earlier attempt may still be sending.
	if pm, ok := msg.(proto.Message); ok {
		msg = shallowCopy(pm)
	}
	tp := tracing.Parent(ctx)
	switch m := msg.(type) {
	case *messages.Put:
		m.TimeoutMs, m.TraceParent = actorutil.TimeoutMs(ctx), tp
	case *messages.Get:
		m.TimeoutMs, m.TraceParent = actorutil.TimeoutMs(ctx), tp
	case *messages.Delete:
		m.TimeoutMs, m.TraceParent = actorutil.TimeoutMs(ctx), tp
	case *messages.QueryObject:
		m.TimeoutMs = actorutil.TimeoutMs(ctx)
	case *messages.WaitObjects:
		m.TimeoutMs = actorutil.TimeoutMs(ctx)
	case *messages.Reduce:
		// The coordinator's own deadline comes a little earlier, so that
		// its TIMEOUT, which names the sources that never appeared, reaches
		// the caller before the caller gives up.
		ms := actorutil.TimeoutMs(ctx)
		m.TimeoutMs = max(1, ms-min(ms/10, 100))
		m.TraceParent = tp
		// A caller that gives up withdraws its Reduce: its coordinator,
		// before its commit, abandons the run instead of committing the
		// target after the caller was answered CANCELED or TIMEOUT. The
		// cancel names the request it withdraws by its sender. A cancel
		// waits up to the grace for the coordinator's answer: CANCELED
		// (nothing of the run stays), or the commit's that began first.
		node, cancel := c.PID(), &messages.CancelReduce{TargetId: m.GetTargetId()}
		return actorutil.RequestGraceOrWithdraw(ctx, c.root, node, msg, answerGrace(ctx), func(replyTo *actor.PID) {
			c.root.RequestWithCustomSender(node, cancel, replyTo)
		})
	}
	return actorutil.RequestGrace(ctx, c.root, c.PID(), msg, answerGrace(ctx))
}

// answerGrace is how long past its deadline a call waits for its node's
// answer: the node gives up at the same deadline (a Reduce's coordinator
// a little before) and answers with what it waited for, which a busy
// machine can deliver late. A tenth of the call's time, at most 250 ms.
func answerGrace(ctx context.Context) time.Duration {
	d, _ := ctx.Deadline()
	return min(time.Until(d)/10, maxAnswerGrace)
}

// maxAnswerGrace bounds answerGrace: a call returns at most this long
// after its deadline.
const maxAnswerGrace = 250 * time.Millisecond

// Put creates object id with a copy of data. Putting the same bytes again
// succeeds; other bytes under the same id fail with CONFLICT.
//
// Put fails with DELETED only if id was deleted before this Put made its
// bytes readable: before the directory registered the object, or, for an
// object of InlineLimit bytes or more (which Gets stream from the copies),
// while the bytes were still being copied into this node's store, so that
// no Get can have returned them. Once they are readable (an object under
// InlineLimit from its registration on, since the directory serves it;
// a larger one once its last byte is in this node's copy; or at once if
// the same bytes already existed under id) the Put has done its job: it
// succeeds even if a consumer Gets the object and Deletes it before this
// reply arrives, and the object stays deleted.
func (c *Client) Put(ctx context.Context, id string, data []byte) (err error) {
	ctx, span := startSpan(ctx, tracing.Put, id, int64(len(data)))
	defer func() { tracing.End(span, err) }()
	if c.data != nil && len(data) >= dataPathMin {
		return c.putData(ctx, id, &PutData{chunks: [][]byte{data}, size: int64(len(data))})
	}
	if ok, err := c.fastPut(ctx, id, data); ok && !errors.Is(err, messages.ErrUnavailable) {
		return err
	}
	// The fast path's UNAVAILABLE (the shard's member went before it
	// answered: the shard moves) is the ordinary Put's to retry, as its
	// own is; answered as it was, a Put failed 190 ms after a shard's host
	// died with most of its deadline left (chaos soak seed 5000129).
	var msg any = &messages.Put{ObjectId: id, Data: data}
	if len(data) >= localput.MinSize && c.local() {
		msg = &localput.Request{Put: msg.(*messages.Put), Fingerprint: fingerprint.Of(data)}
	}
	return c.retry(ctx, func(ctx context.Context) (bool, error) {
		res, err := c.call(ctx, msg)
		if err != nil {
			return false, err
		}
		r, ok := res.(*messages.PutReply)
		if !ok {
			return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Put", res)
		}
		return !messages.IsUndeliveredBy(r.GetError(), c.PID()), messages.ErrOrNil(r.GetError())
	})
}

// Get returns a private copy of object id, waiting for it to be created
// if it does not exist yet.
func (c *Client) Get(ctx context.Context, id string) ([]byte, error) {
	return c.get(ctx, id, false)
}

// GetReadOnly is Get without the final copy: the slice is the node's own
// buffer and must not be modified.
func (c *Client) GetReadOnly(ctx context.Context, id string) ([]byte, error) {
	return c.get(ctx, id, true)
}

func (c *Client) get(ctx context.Context, id string, readOnly bool) (_ []byte, err error) {
	ctx, span := startSpan(ctx, tracing.Get, id, -1)
	defer func() { tracing.End(span, err) }()
	if c.data != nil {
		s := &bufferSink{id: id}
		if err := c.getData(ctx, id, s); err != nil {
			return nil, err
		}
		return s.buf, nil
	}
	if data, ok := c.fastGet(ctx, id, readOnly); ok {
		return data, nil
	}
	// In the node's own process the private copy is made here, from the
	// node's read-only buffer: the node would make it on its actor's
	// goroutine, holding up its mailbox for the whole copy, and into new
	// heap memory whose every page faults in on the copy's first touch
	// (about 16,000 faults for 64 MiB). bufalloc hands out the memory of
	// the large buffers nothing references any more, faulted in already.
	copyHere := !readOnly && c.local()
	var data []byte
	err = c.retry(ctx, func(ctx context.Context) (bool, error) {
		res, err := c.call(ctx, &messages.Get{ObjectId: id, ReadOnly: readOnly || copyHere})
		if err != nil {
			return false, err
		}
		r, ok := res.(*messages.GetReply)
		if !ok {
			return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Get", res)
		}
		data = r.GetData()
		return !messages.IsUndeliveredBy(r.GetError(), c.PID()), messages.ErrOrNil(r.GetError())
	})
	if err != nil {
		return nil, err
	}
	if copyHere {
		data = privateCopy(data)
	}
	return data, nil
}

// privateCopy is a copy of b that its caller owns, in a buffer from
// bufalloc (not zeroed: the copy writes every byte).
func privateCopy(b []byte) []byte {
	c := bufalloc.Make(len(b))
	copy(c, b)
	return c
}

// Delete frees every copy of object id. The id cannot be used again.
func (c *Client) Delete(ctx context.Context, id string) (err error) {
	ctx, span := startSpan(ctx, tracing.Delete, id, -1)
	defer func() { tracing.End(span, err) }()
	return c.retry(ctx, func(ctx context.Context) (bool, error) {
		res, err := c.call(ctx, &messages.Delete{ObjectId: id})
		if err != nil {
			return false, err
		}
		r, ok := res.(*messages.DeleteReply)
		if !ok {
			return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Delete", res)
		}
		return !messages.IsUndeliveredBy(r.GetError(), c.PID()), messages.ErrOrNil(r.GetError())
	})
}

// Info returns the directory's entry for id: size, locations and the
// transfers that formed its broadcast tree. With wait it waits for the
// object to exist.
func (c *Client) Info(ctx context.Context, id string, wait bool) (*messages.ObjectInfo, error) {
	var info *messages.ObjectInfo
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		res, err := c.call(ctx, &messages.QueryObject{ObjectId: id, Wait: wait})
		if err != nil {
			return false, err
		}
		r, ok := res.(*messages.ObjectInfo)
		if !ok {
			return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to QueryObject", res)
		}
		info = r
		return !messages.IsUndeliveredBy(r.GetError(), c.PID()), messages.ErrOrNil(r.GetError())
	})
	if err != nil {
		return nil, err
	}
	return info, nil
}

// Reduce creates target from the first num of sources to become ready,
// combined element-wise with op over dtype (little-endian arrays of equal
// size). The reply lists which sources were reduced, in tree order, and
// which were not (they stay valid). It returns when target is complete;
// target can be fetched (and streamed) while it is being produced.
func (c *Client) Reduce(ctx context.Context, target string, sources []string, num int, op messages.ReduceOp, dtype messages.DType) (*messages.ReduceReply, error) {
	if err := checkNum(num, len(sources)); err != nil {
		return &messages.ReduceReply{TargetId: target, Error: err}, err
	}
	return c.reduce(ctx, &messages.Reduce{TargetId: target, SourceIds: sources, NumObjects: int32(num), Op: op, Dtype: dtype})
}

// AllReduce is Reduce followed by a broadcast of target to every node that
// held a reduced source; the broadcast starts as soon as the target's
// first chunk exists. It returns when every such node has the result.
func (c *Client) AllReduce(ctx context.Context, target string, sources []string, num int, op messages.ReduceOp, dtype messages.DType) (*messages.ReduceReply, error) {
	if err := checkNum(num, len(sources)); err != nil {
		return &messages.ReduceReply{TargetId: target, Error: err}, err
	}
	return c.reduce(ctx, &messages.Reduce{TargetId: target, SourceIds: sources, NumObjects: int32(num), Op: op, Dtype: dtype, AllReduce: true})
}

// ReduceUntilKnee reduces the sources that arrive before the knee of
// their arrival times instead of a fixed number (see messages.ReduceKnee):
// at least knee.MinPercent of them, at most knee.MaxObjects. The reply's
// ReducedIds say which, and CompletedBy what fixed their number.
func (c *Client) ReduceUntilKnee(ctx context.Context, target string, sources []string, knee *messages.ReduceKnee, op messages.ReduceOp, dtype messages.DType) (*messages.ReduceReply, error) {
	return c.reduce(ctx, &messages.Reduce{TargetId: target, SourceIds: sources, Knee: knee, Op: op, Dtype: dtype})
}

// checkNum rejects a count that the message's int32 cannot carry before
// it is converted: the conversion would wrap it (1<<32 + 1 becomes 1)
// into a count the node accepts. Counts below 1 are rejected here too.
// The wording is the node's, which checks the upper bound of sources.
func checkNum(num, sources int) *messages.Error {
	if num < 1 || int64(num) > math.MaxInt32 {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: num_objects %d outside 1..%d", num, sources)
	}
	return nil
}

func (c *Client) reduce(ctx context.Context, m *messages.Reduce) (_ *messages.ReduceReply, err error) {
	name := tracing.Reduce
	if m.GetAllReduce() {
		name = tracing.AllReduce
	}
	ctx, span := startSpan(ctx, name, m.GetTargetId(), -1)
	defer func() { tracing.End(span, err) }()
	for {
		node := c.PID()
		res, err := c.call(ctx, m)
		var r *messages.ReduceReply
		if err == nil {
			var ok bool
			if r, ok = res.(*messages.ReduceReply); !ok {
				return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Reduce", res)
			}
			if err = messages.ErrOrNil(r.GetError()); err == nil {
				return r, nil
			}
		}
		// The node is gone: move on for the next call, and send this one
		// again only if it never reached the node.
		gone := r == nil || messages.IsUndeliveredBy(r.GetError(), node)
		if !gone || !c.failedOver(ctx, err) || !neverReached(err, node) {
			return r, err
		}
	}
}
