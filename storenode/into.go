package storenode

import (
	"context"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/getinto"
	"github.com/hoplite-go/hoplite/messages"
)

// GetInto fetches object id into dst and returns its size n: dst[:n]
// holds its bytes, and dst[n:] is untouched. Like Get it waits for the
// object to be created, fails over to another copy if its sender fails
// mid-transfer (resuming at the bytes already in dst), and returns the
// same typed errors; a dst shorter than the object fails with
// INVALID_ARGUMENT naming both sizes, before a byte moves.
//
// Unlike Get it allocates nothing: the bytes of a remote copy go from the
// data plane straight into dst (on the TCP data plane a chunk is read
// from the socket into it; the in-memory transport of an embedded cluster
// copies each chunk once). So the node keeps no copy of an object it did
// not hold — the caller owns dst and may overwrite it, so it cannot be a
// copy the node serves — and the directory neither records it nor offers
// it to other receivers: a GetInto does not extend a broadcast tree. It
// reads a copy that serves nobody if there is one, else a busy one. An
// object that is on this node already (a whole copy, or one arriving for
// a Get or a Put) is copied from the node's store when it is complete.
//
// On error dst may hold part of the object; bytes past the object's size
// are never written. Whatever the outcome, GetInto returns only once
// nothing writes into dst any more, so the caller may reuse it at once;
// concurrent GetIntos need distinct buffers.
//
// Through a client of a store node in another process, the caller's
// memory cannot be lent to the node: with a DataPath (cluster.Dial) the
// node brings a copy into its store and the bytes come from there
// straight into dst (on TCP read from the socket there); without one
// (Member.ClientOf) GetInto is a Get and one copy into dst. The results
// are the same.
func (c *Client) GetInto(ctx context.Context, id string, dst []byte) (int, error) {
	if c.data != nil {
		s := &bufferSink{id: id, buf: dst, given: true}
		if err := c.getData(ctx, id, s); err != nil {
			return 0, err
		}
		return int(s.off), nil
	}
	if !c.local() {
		b, err := c.GetReadOnly(ctx, id)
		if err != nil {
			return 0, err
		}
		if len(b) > len(dst) {
			return 0, tooSmall(id, len(b), len(dst))
		}
		return copy(dst, b), nil
	}
	var n int
	err := c.retry(ctx, func(ctx context.Context) (raced bool, err error) {
		n, raced, err = c.getInto(ctx, id, dst)
		return raced, err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// local reports whether the store node runs in the client's own actor
// system, which can lend it memory.
func (c *Client) local() bool {
	return c.PID().GetAddress() == c.root.ActorSystem().Address()
}

func tooSmall(id string, size, have int) error {
	return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q is %d bytes; the buffer holds only %d", id, size, have)
}

// getInto is one attempt of GetInto; raced says the node answered (see
// retry). A failed attempt may be retried into the same dst: the memory
// is the caller's again when it returns.
func (c *Client) getInto(ctx context.Context, id string, dst []byte) (n int, raced bool, err error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.defaultTimeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	wctx, stopWriting := context.WithCancel(ctx)
	buf := getinto.NewBuffer(wctx, dst)
	res, err := actorutil.Request(ctx, c.root, c.PID(), &getinto.Request{ObjectID: id, Dst: buf, Deadline: deadline})
	// The memory comes back before anything else happens to it: a writer
	// that outlives the answer (the node stopped the fetch and answered
	// at once; the caller's deadline passed) is told to stop, and waited
	// for.
	stopWriting()
	buf.Close()
	if err != nil {
		return 0, false, err
	}
	var data []byte
	switch r := res.(type) {
	case *getinto.Reply:
		if r.Err != nil {
			return 0, true, r.Err
		}
		if r.Data == nil {
			return int(r.N), true, nil
		}
		data = r.Data
	case *messages.GetReply:
		if err := messages.ErrOrNil(r.GetError()); err != nil {
			return 0, true, err
		}
		data = r.GetData() // the node's own copy: read-only, copied here
	default:
		return 0, false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to GetInto", res)
	}
	if len(data) > len(dst) {
		return 0, true, tooSmall(id, len(data), len(dst))
	}
	return copy(dst, data), true, nil
}
