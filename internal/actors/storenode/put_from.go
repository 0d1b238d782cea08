package storenode

import (
	"context"
	"io"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// putFrom serves a PutFrom: a Put whose bytes this node fetches from its
// sender's data endpoint, as it fetches a copy from a peer, straight
// into its creator copy. The sender is a client in another process:
// through the remote, those bytes would be one message, encoded, copied
// and decoded whole, and capped in size.
func (n *StoreNode) putFrom(ctx actor.Context, m *messages.PutFrom) {
	id, size := m.GetObjectId(), m.GetSize()
	req := storeproto.PutRequest{ObjectID: id, Size: size, Requester: requester(ctx)}
	fail := func(err *messages.Error) { n.answerPut(ctx, req, err) }
	switch {
	case n.validate(id) != nil:
		fail(n.validate(id))
		return
	case size < 0:
		fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q from %s: negative size %d", id, m.GetDataAddress(), size))
		return
	case m.GetDataAddress() == "":
		fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: no data address to fetch it from", id))
		return
	case size > n.cfg.Store.Capacity():
		fail(messages.Errorf(messages.ErrorCode_CAPACITY, "object %q of %d bytes exceeds the node capacity of %d bytes", id, size, n.cfg.Store.Capacity()))
		return
	case n.cfg.Transport == nil:
		fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "store node %s has no data plane to fetch %q from", n.cfg.Self.GetNodeId(), id))
		return
	}
	if size < n.cfg.InlineLimit {
		// The directory keeps an inline object's bytes from its
		// registration on, so they must be here before it starts.
		n.fetchSmallPut(ctx, req, m)
		return
	}
	n.startPutOf(ctx, req, nil, m.GetDataAddress(), m.GetTimeoutMs(), m.GetFingerprint())
}

// putFromSmall is a PutFrom under the inline limit whose bytes arrived
// (or failed to).
type putFromSmall struct {
	req       storeproto.PutRequest
	data      []byte
	timeoutMs int64
	err       error
}

// A fetch may report after its node stopped: that is expected.
func (*putFromSmall) IgnoreDeadLetterLogging() {}

// fetchSmallPut fetches a small PutFrom's bytes on its own goroutine and
// hands them back to the node as an ordinary Put's.
func (n *StoreNode) fetchSmallPut(ctx actor.Context, req storeproto.PutRequest, m *messages.PutFrom) {
	system, self, cfg := ctx.ActorSystem(), ctx.Self(), n.cfg
	deadline := time.Now().Add(n.cfg.timeout(m.GetTimeoutMs()))
	chunk := n.cfg.streamChunk(m.GetSize())
	go func() {
		rctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		buf, off := make([]byte, m.GetSize()), 0
		err := fetchPut(rctx, cfg, m.GetObjectId(), m.GetDataAddress(), m.GetSize(), m.GetFingerprint(), chunk,
			func() ([]byte, error) { return buf[off:], nil },
			func(k int) error { off += k; return nil })
		system.Root.Send(self, &putFromSmall{req: req, data: buf, timeoutMs: m.GetTimeoutMs(), err: err})
	}()
}

func (n *StoreNode) putFromSmallDone(ctx actor.Context, m *putFromSmall) {
	if m.err != nil {
		n.answerPut(ctx, m.req, messages.AsError(m.err))
		return
	}
	n.startPut(ctx, m.req, m.data, m.timeoutMs, fingerprint.Of(m.data))
}

// copyFrom is copyIn for a PutFrom: the bytes come from the sender's
// data endpoint straight into the creator copy (on TCP, read from the
// socket into its buffer), bounded by the Put's deadline (the sender
// stops serving then) and, chunk by chunk, by the stall timeout. A copy
// that fails is dropped and withdrawn from the directory (see
// putFromCopied): unlike a Put's own bytes, these can fail to arrive.
func (n *StoreNode) copyFrom(ctx actor.Context, id uint64, run *putRun, readable bool) {
	system, self, cfg := ctx.ActorSystem(), ctx.Self(), n.cfg
	obj, from, req := run.obj, run.from, run.reg.Request()
	chunk := n.cfg.streamChunk(req.Size)
	w := obj.NewWriter()
	go func() {
		rctx, cancel := context.WithDeadline(context.Background(), req.Deadline)
		defer cancel()
		err := fetchPut(rctx, cfg, req.ObjectID, from, req.Size, req.Fingerprint, chunk, w.Tail, w.Advance)
		if err == nil {
			err = cfg.Store.Complete(obj)
		}
		if err != nil {
			system.Root.Send(self, putCopied{id: id, err: messages.AsError(putEnded(obj, err, readable)), abort: true})
			return
		}
		system.Root.Send(self, putCopied{id: id, complete: true})
	}()
}

// fetchPut streams a PutFrom's object id, size bytes, from the sender at
// addr: tail is where the next chunk goes, advance publishes the k bytes
// put there. The bytes must be size and fingerprint, as the PutFrom said:
// the last chunk is published only once they are, so that a copy no Get
// may read never completes.
func fetchPut(ctx context.Context, cfg *Config, id, addr string, size int64, fp uint64, chunk int,
	tail func() ([]byte, error), advance func(k int) error) error {
	octx, cancel := context.WithTimeout(ctx, cfg.stall())
	s, err := cfg.Transport.Open(octx, cfg.Self.GetDataAddress(), addr, id, 0, chunk)
	cancel()
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Size() != size {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: its sender serves %d bytes, the request said %d", id, s.Size(), size)
	}
	var sum fingerprint.Writer
	for off := int64(0); off < size; {
		dst, err := tail()
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.stall())
		k, err := s.NextInto(cctx, dst)
		cancel()
		if err == io.EOF {
			return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "put of %q: the stream from its sender ended at %d of %d bytes", id, off, size)
		}
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		sum.Write(dst[:k])
		off += int64(k)
		if off == size && sum.Sum() != fp {
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: the %d bytes received do not match the fingerprint the request named", id, size)
		}
		if err := advance(k); err != nil {
			return err
		}
	}
	if size == 0 && sum.Sum() != fp {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: an empty object does not match the fingerprint the request named", id)
	}
	return nil
}

// samePutFromLater is samePutLater for a PutFrom, whose bytes are not
// here: the copy this node holds is the same object if its size and
// fingerprint are the PutFrom's, as the directory decides between
// nodes.
func (n *StoreNode) samePutFromLater(ctx actor.Context, req storeproto.PutRequest, local *storenode.Object) {
	system := ctx.ActorSystem()
	go func() {
		rctx, cancel := context.WithDeadline(context.Background(), req.Deadline)
		defer cancel()
		err := local.WaitComplete(rctx)
		if err == nil && (local.Size() != req.Size || local.Fingerprint() != req.Fingerprint) {
			err = messages.Errorf(messages.ErrorCode_CONFLICT, "object %q already exists with different contents", local.ID())
		}
		if to, ok := req.Requester.(*actor.PID); ok {
			system.Root.Send(to, storeproto.PutAnswer(req, messages.AsError(err)))
		}
	}()
}
