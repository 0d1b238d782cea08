package storenode

import (
	"context"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// IntoBuffer is the destination of one GetInto: the caller's memory,
// lent to the store node that fills it. At most one goroutine holds it at
// a time (Hold), and once the caller's GetInto returns nobody can hold it
// again; GetInto returns only after the holder let go, so the caller may
// reuse the memory at once.
type IntoBuffer struct {
	b   []byte
	ctx context.Context

	mu     sync.Mutex
	held   bool
	closed bool
	holder sync.WaitGroup
}

// newIntoBuffer lends b until close; ctx ends when the caller stops
// waiting, and with it every write.
func newIntoBuffer(ctx context.Context, b []byte) *IntoBuffer {
	return &IntoBuffer{b: b, ctx: ctx}
}

// Len is how many bytes the buffer holds.
func (d *IntoBuffer) Len() int64 { return int64(len(d.b)) }

// Context ends when the caller stops waiting: a writer's I/O is bound to
// it, so that the caller's wait for the writer to let go is short.
func (d *IntoBuffer) Context() context.Context { return d.ctx }

// Hold gives the caller's memory to one writer until Release. It fails if
// another writer holds it (a second one would race the first) or the
// caller has returned (the memory is the caller's again).
func (d *IntoBuffer) Hold() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held || d.closed {
		return nil, false
	}
	d.held = true
	d.holder.Add(1)
	return d.b, true
}

// Release ends a Hold.
func (d *IntoBuffer) Release() {
	d.mu.Lock()
	d.held = false
	d.mu.Unlock()
	d.holder.Done()
}

// close takes the memory back: no Hold succeeds after it, and it returns
// once the current holder (if any) released it.
func (d *IntoBuffer) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.holder.Wait()
}

// GetIntoRequest asks the store node in this process for object
// ObjectID in Dst (Client.GetInto). It carries the caller's memory, so it
// is no protobuf message and never crosses a process.
type GetIntoRequest struct {
	ObjectID string
	Dst      *IntoBuffer
	Deadline time.Time
}

// GetIntoReply answers a GetIntoRequest: Err, or N bytes of the object,
// which are in Dst already unless Data is set (inline bytes the directory
// sent, which the caller copies; a local copy is answered with a
// messages.GetReply to copy from instead).
type GetIntoReply struct {
	ObjectID string
	N        int64
	Data     []byte
	Err      error
}

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
// Through a client of a store node in another process (cluster.Dial,
// Member.ClientOf), the caller's memory cannot be lent to the node:
// GetInto is then a Get and one copy into dst, with the same results.
func (c *Client) GetInto(ctx context.Context, id string, dst []byte) (int, error) {
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
	return c.node.GetAddress() == c.root.ActorSystem().Address()
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
	buf := newIntoBuffer(wctx, dst)
	res, err := actorutil.Request(ctx, c.root, c.node, &GetIntoRequest{ObjectID: id, Dst: buf, Deadline: deadline})
	// The memory comes back before anything else happens to it: a writer
	// that outlives the answer (the node stopped the fetch and answered
	// at once; the caller's deadline passed) is told to stop, and waited
	// for.
	stopWriting()
	buf.close()
	if err != nil {
		return 0, false, err
	}
	var data []byte
	switch r := res.(type) {
	case *GetIntoReply:
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
