package reduceio

import (
	"context"
	"io"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// sliceReader reads bytes [off, off+n) of an object as if they were an
// object of n bytes. A sliced AllReduce reduces each slice of a source in
// place this way: no view object, no copy, and the source's reader keeps
// the whole object held against eviction.
type sliceReader struct {
	r   transport.ObjectReader
	off int64
	n   int64
}

// NewSliceReader returns a reader of bytes [off, off+n) of r, which it
// takes over (closing the slice closes r). A range outside r is
// INVALID_ARGUMENT and closes r.
func NewSliceReader(r transport.ObjectReader, off, n int64) (transport.ObjectReader, error) {
	if off < 0 || n < 0 || off+n > r.Size() {
		r.Close()
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "slice [%d, %d) outside an object of %d bytes", off, off+n, r.Size())
	}
	return &sliceReader{r: r, off: off, n: n}, nil
}

func (s *sliceReader) Size() int64 { return s.n }

func (s *sliceReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	if off >= s.n {
		return nil, io.EOF
	}
	b, err := s.r.ReadAt(ctx, s.off+off, int(min(int64(max), s.n-off)))
	if err == io.EOF {
		// The object is shorter than its size said: it cannot be.
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "slice read at %d ended early", off)
	}
	return b, err
}

func (s *sliceReader) Close() { s.r.Close() }

// CopyStream copies the whole of s into dst, which must be exactly
// s.Size() bytes: one slice of a sliced AllReduce landing in place in the
// target's buffer, read into it by the stream (NextInto), so the only
// copy is the data plane's own.
func CopyStream(ctx context.Context, s transport.Stream, dst []byte) error {
	if s.Size() != int64(len(dst)) {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "slice of %d bytes for a range of %d", s.Size(), len(dst))
	}
	return copyStreamFrom(ctx, s, dst, 0)
}

// CopyStreamLazy is CopyStream into the n bytes that dst returns, which
// it calls only once the stream's first bytes have arrived (or it is
// empty): a gather of a sliced AllReduce makes the target's buffer once
// it has something to put there, not with every other output of the
// AllReduce at its start (see reduceWorker.gather). The first chunk is
// copied, the rest lands in place as with CopyStream.
func CopyStreamLazy(ctx context.Context, s transport.Stream, n int64, dst func() ([]byte, error)) error {
	if s.Size() != n {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "slice of %d bytes for a range of %d", s.Size(), n)
	}
	var first []byte
	var err error
	if n > 0 {
		if first, err = s.Next(ctx); err != nil && err != io.EOF {
			return err
		}
		if int64(len(first)) > n {
			return messages.Errorf(messages.ErrorCode_INTERNAL, "slice stream sent past its size %d", n)
		}
	}
	d, derr := dst()
	if derr != nil {
		return derr
	}
	if int64(len(d)) != n {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "a range of %d bytes for a slice of %d", len(d), n)
	}
	at := copy(d, first)
	if err == io.EOF {
		if at != len(d) {
			return messages.Errorf(messages.ErrorCode_INTERNAL, "slice stream ended at %d of %d bytes", at, len(d))
		}
		return nil
	}
	return copyStreamFrom(ctx, s, d, at)
}

// Relay copies the whole of s, size bytes, into w's object from its
// front: each chunk is read into the object's own buffer (NextInto into
// Tail) and published at once (Advance), so that readers of the object
// stream it while it arrives. A sliced AllReduce's relay passes a
// reduced slice on around the ring this way, the data plane's copy the
// only one on this member.
func Relay(ctx context.Context, w *objstore.Writer, s transport.Stream, size int64) error {
	if s.Size() != size {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "relay of %d bytes from a stream of %d", size, s.Size())
	}
	for at := int64(0); at < size; {
		if ctx.Err() != nil {
			return messages.AsError(ctx.Err())
		}
		tail, err := w.Tail()
		if err != nil {
			return err
		}
		n, err := s.NextInto(ctx, tail)
		if err == io.EOF {
			return messages.Errorf(messages.ErrorCode_INTERNAL, "relay input ended at %d of %d bytes", at, size)
		}
		if err != nil {
			return err
		}
		if err := w.Advance(n); err != nil {
			return err
		}
		at += int64(n)
	}
	return nil
}

// copyStreamFrom copies the rest of s into dst[at:], each chunk put in
// place by the stream (NextInto): the only copy is the data plane's own.
func copyStreamFrom(ctx context.Context, s transport.Stream, dst []byte, at int) error {
	for at < len(dst) {
		if ctx.Err() != nil {
			return messages.AsError(ctx.Err())
		}
		n, err := s.NextInto(ctx, dst[at:])
		at += n
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if at != len(dst) {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "slice stream ended at %d of %d bytes", at, len(dst))
	}
	return nil
}
