package storenode

import (
	"context"

	"github.com/hoplite-go/hoplite/transport"
)

// hooked returns in with Hooks.BeforeReduceChunk called before each of
// its chunks, base being the offset in id of its first byte; without
// the hook it is in itself, so a node without fault injection pays
// nothing per chunk.
func (w *reduceWorker) hooked(in transport.Stream, id string, base int64) transport.Stream {
	h := w.cfg.Hooks.BeforeReduceChunk
	if h == nil {
		return in
	}
	s := &hookedStream{Stream: in, hook: h, node: w.cfg.Self.GetNodeId(), id: id, off: base}
	if into, ok := in.(transport.IntoStream); ok {
		// A gather reads straight into the target's buffer: keep that.
		return &hookedIntoStream{hookedStream: s, into: into}
	}
	return s
}

// hookedStream calls its hook before each chunk it reads. One goroutine
// reads it, as any Stream.
type hookedStream struct {
	transport.Stream
	hook     func(node, id string, off int64)
	node, id string
	off      int64
}

func (s *hookedStream) Next(ctx context.Context) ([]byte, error) {
	s.hook(s.node, s.id, s.off)
	b, err := s.Stream.Next(ctx)
	s.off += int64(len(b))
	return b, err
}

// hookedIntoStream is a hookedStream of a transport.IntoStream.
type hookedIntoStream struct {
	*hookedStream
	into transport.IntoStream
}

func (s *hookedIntoStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	s.hook(s.node, s.id, s.off)
	n, err := s.into.NextInto(ctx, dst)
	s.off += int64(n)
	return n, err
}
