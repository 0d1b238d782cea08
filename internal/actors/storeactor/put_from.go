package storeactor

import (
	"context"
	"io"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/messages"
)

// putFrom serves a PutFrom: a Put whose bytes this node fetches from its
// sender's data endpoint, as it fetches a copy from a peer. The sender is
// a client in another process: through the remote, those bytes would be
// one message, encoded, copied and decoded whole, and capped in size.
//
// The bytes arrive in a buffer of their own, fingerprinted as they come,
// and only then does the Put start as any other, its copy adopting the
// buffer: the directory's registration needs the fingerprint, which the
// sender need not compute (it would read every byte once more before
// sending the first), and a transfer that fails has registered nothing.
// The buffer counts against the store's capacity only from then on.
func (n *StoreNode) putFrom(ctx actor.Context, m *messages.PutFrom) {
	id, size := m.GetObjectId(), m.GetSize()
	req := storeproto.PutRequest{ObjectID: id, Requester: requester(ctx)}
	fail := func(err *messages.Error) { n.answerPut(ctx, req, err) }
	switch {
	case n.validate(id) != nil:
		fail(n.validate(id))
		return
	case size < 0 && (size != -1 || m.GetSegmentSize() < storeproto.MinSegment || m.GetSegmentSize() > storeproto.MaxSegment):
		fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q from %s: size %d with segments of %d bytes (want a size, or -1 with segments of %d to %d bytes)",
			id, m.GetDataAddress(), size, m.GetSegmentSize(), storeproto.MinSegment, storeproto.MaxSegment))
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
	system, self, cfg := ctx.ActorSystem(), ctx.Self(), n.cfg
	deadline := time.Now().Add(n.cfg.timeout(m.GetTimeoutMs()))
	// The whole object arrives before anyone reads it (the copy adopts
	// the buffer at the end), so its stream takes the largest chunk: the
	// node's streamChunk, cut for chains that forward as they receive, is
	// 256 KiB until the node has fetched from a peer, and a creator that
	// never did received a Put's bytes in a read per 256 KiB frame, at
	// twice the CPU of a fetch of the same bytes.
	chunk := plan.MaxChunk
	_, span := tracing.Start(m.GetTraceParent(), tracing.Transfer, attribute.String("hoplite.object", id),
		attribute.String("hoplite.sender", m.GetDataAddress()), attribute.String("hoplite.receiver", cfg.Self.GetNodeId()), attribute.Bool("hoplite.put", true))
	go func() {
		rctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		fetch := fetchPut
		if size == -1 {
			fetch = fetchPutSegments(m.GetSegmentSize())
		}
		data, fp, err := fetch(rctx, cfg, id, m.GetDataAddress(), size, chunk)
		tracing.End(span, err)
		system.Root.Send(self, &putFetched{req: req, data: data, fingerprint: fp, timeoutMs: m.GetTimeoutMs(), err: err})
	}()
}

// putFetched is a PutFrom whose bytes arrived (or failed to).
type putFetched struct {
	req         storeproto.PutRequest
	data        []byte
	fingerprint uint64
	timeoutMs   int64
	err         error
}

// A fetch may report after its node stopped: that is expected.
func (*putFetched) IgnoreDeadLetterLogging() {}

func (n *StoreNode) putFetchedDone(ctx actor.Context, m *putFetched) {
	if m.err != nil {
		n.answerPut(ctx, m.req, messages.AsError(m.err))
		return
	}
	n.startPutOf(ctx, m.req, m.data, true, m.timeoutMs, m.fingerprint)
}

// fetchPut receives a PutFrom's object id, size bytes, from the sender
// at addr into a new buffer and returns it with its fingerprint. Every
// read is bounded by the stall timeout, the whole by ctx.
func fetchPut(ctx context.Context, cfg *Config, id, addr string, size int64, chunk int) ([]byte, uint64, error) {
	octx, cancel := context.WithTimeout(ctx, cfg.stall())
	s, err := cfg.Transport.Open(octx, cfg.Self.GetDataAddress(), addr, id, 0, chunk)
	cancel()
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	if s.Size() != size {
		return nil, 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: its sender serves %d bytes, the request said %d", id, s.Size(), size)
	}
	buf := bufalloc.Make(int(size))
	// The fingerprint reads every byte (two CRC-32s): a goroutine of its
	// own computes it behind the receive, so that the two overlap
	// instead of adding up.
	written := make(chan int64, size/int64(max(chunk, 1))+2)
	sum := make(chan uint64, 1)
	go func() {
		var fp fingerprint.Writer
		var done int64
		for off := range written {
			fp.Write(buf[done:off])
			done = off
		}
		sum <- fp.Sum()
	}()
	var off int64
	for off < size {
		cctx, cancel := context.WithTimeout(ctx, cfg.stall())
		k, rerr := s.NextInto(cctx, buf[off:])
		cancel()
		if rerr == io.EOF {
			rerr = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "put of %q: the stream from its sender ended at %d of %d bytes", id, off, size)
		}
		if rerr == nil && ctx.Err() != nil {
			rerr = ctx.Err()
		}
		if rerr != nil {
			err = rerr
			break
		}
		off += int64(k)
		written <- off
	}
	close(written)
	fp := <-sum
	if err != nil {
		return nil, 0, err
	}
	return buf, fp, nil
}
