package reduceio

import (
	"context"
	"io"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// cursor reads a stream in exact ranges. Stream chunks need not line up
// with the ranges or even with element boundaries; the few bytes that
// straddle a boundary wait in carry (at most one chunk plus one element).
type cursor struct {
	s     transport.Stream
	carry []byte
}

// take hands fn consecutive pieces of the stream, each a whole number of
// width-byte elements, that together are exactly n bytes; at is each
// piece's offset within the n. n must be a multiple of width.
func (c *cursor) take(ctx context.Context, n, width int, fn func(p []byte, at int) error) error {
	at := 0
	for at < n {
		if len(c.carry) == 0 {
			b, err := c.next(ctx)
			if err != nil {
				return err
			}
			use := min(len(b), n-at)
			use -= use % width
			if use > 0 {
				if err := fn(b[:use], at); err != nil {
					return err
				}
				at += use
			}
			// The stream reuses its chunk on the next call: keep a copy.
			c.carry = append(c.carry[:0], b[use:]...)
			continue
		}
		if len(c.carry) < width {
			b, err := c.next(ctx)
			if err != nil {
				return err
			}
			c.carry = append(c.carry, b...)
			continue
		}
		use := min(len(c.carry), n-at)
		use -= use % width
		if err := fn(c.carry[:use], at); err != nil {
			return err
		}
		at += use
		c.carry = c.carry[:copy(c.carry, c.carry[use:])]
	}
	return nil
}

func (c *cursor) next(ctx context.Context) ([]byte, error) {
	b, err := c.s.Next(ctx)
	if err == io.EOF {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "reduce input ended early")
	}
	return b, err
}

// Combine fills w's object range by range: a copy of own, then every
// child accumulated into it with op. Each finished range is published at
// once, so the parent (or a Get of the target) streams it while the rest
// is still being reduced. onRange sees every published range.
func Combine(ctx context.Context, w *objstore.Writer, size int64, chunk int, op messages.ReduceOp, dt messages.DType,
	own transport.Stream, kids []transport.Stream, onRange func([]byte)) error {
	width, err := kernel.Width(dt)
	if err != nil {
		return err
	}
	chunk -= chunk % width
	if chunk <= 0 {
		chunk = width
	}
	ownC := &cursor{s: own}
	kidC := make([]*cursor, len(kids))
	for i, k := range kids {
		kidC[i] = &cursor{s: k}
	}
	for off := int64(0); off < size; {
		n := int(min(int64(chunk), size-off))
		tail, err := w.Tail()
		if err != nil {
			return err
		}
		dst := tail[:n]
		if err := ownC.take(ctx, n, width, func(p []byte, at int) error {
			copy(dst[at:], p)
			return nil
		}); err != nil {
			return err
		}
		for _, c := range kidC {
			if err := c.take(ctx, n, width, func(p []byte, at int) error {
				return kernel.Accumulate(op, dt, dst[at:at+len(p)], p)
			}); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return messages.AsError(ctx.Err())
		}
		if onRange != nil {
			onRange(dst)
		}
		if err := w.Advance(n); err != nil {
			return err
		}
		off += int64(n)
	}
	return nil
}

// LocalStream reads an object of this node's own store as a Stream.
type LocalStream struct {
	r     transport.ObjectReader
	off   int64
	chunk int
}

// NewLocalStream streams r in chunks of chunk bytes.
func NewLocalStream(r transport.ObjectReader, chunk int) *LocalStream {
	return &LocalStream{r: r, chunk: chunk}
}

// Size is the object's size.
func (l *LocalStream) Size() int64 { return l.r.Size() }

// Next returns the next chunk, or io.EOF after the last.
func (l *LocalStream) Next(ctx context.Context) ([]byte, error) {
	if l.off >= l.r.Size() {
		return nil, io.EOF
	}
	b, err := l.r.ReadAt(ctx, l.off, l.chunk)
	if err != nil {
		return nil, err
	}
	l.off += int64(len(b))
	return b, nil
}

// NextInto copies the next chunk into dst (transport.Stream); a reduce
// reads its own input with Next, without a copy.
func (l *LocalStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	if want := min(int64(l.chunk), l.r.Size()-l.off); want > 0 && int64(len(dst)) < want {
		return 0, messages.Errorf(messages.ErrorCode_INTERNAL, "local stream: a buffer of %d bytes for chunks of up to %d", len(dst), want)
	}
	b, err := l.Next(ctx)
	if err != nil {
		return 0, err
	}
	return copy(dst, b), nil
}

// Close releases the reader.
func (l *LocalStream) Close() { l.r.Close() }
