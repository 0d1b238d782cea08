package storeactor

import (
	"context"

	"github.com/hoplite-go/hoplite/internal/transport"
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
	return &hookedStream{Stream: in, hook: h, node: w.cfg.Self.GetNodeId(), id: id, off: base}
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

// NextInto is Next for a reader that puts the chunk in place (a gather
// reads straight into the target's buffer).
func (s *hookedStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	s.hook(s.node, s.id, s.off)
	n, err := s.Stream.NextInto(ctx, dst)
	s.off += int64(n)
	return n, err
}
