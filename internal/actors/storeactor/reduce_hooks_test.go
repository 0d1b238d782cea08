package storeactor

import (
	"context"
	"io"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// chunks is a Stream of fixed chunks; into counts its NextInto calls.
type chunks struct {
	left [][]byte
	into int
}

func (c *chunks) Size() int64 {
	var n int64
	for _, b := range c.left {
		n += int64(len(b))
	}
	return n
}

func (c *chunks) Next(context.Context) ([]byte, error) {
	if len(c.left) == 0 {
		return nil, io.EOF
	}
	b := c.left[0]
	c.left = c.left[1:]
	return b, nil
}

func (c *chunks) Close() {}

func (c *chunks) NextInto(ctx context.Context, dst []byte) (int, error) {
	c.into++
	b, err := c.Next(ctx)
	return copy(dst, b), err
}

// BeforeReduceChunk sees every chunk a reduce input yields, at its offset
// in the input; a gather's stream keeps reading into the caller's buffer
// (the hook's NextInto is the stream's);
// without the hook the stream is not wrapped at all.
func TestBeforeReduceChunkSeesEveryChunk(t *testing.T) {
	input := func() [][]byte { return [][]byte{make([]byte, 4), make([]byte, 4), make([]byte, 2)} }
	var seen []int64
	cfg := &Config{Self: &messages.NodeRef{NodeId: "n"}}
	cfg.Hooks.BeforeReduceChunk = func(node, id string, off int64) {
		if node != "n" || id != "src" {
			t.Errorf("hook called for %s/%s, want n/src", node, id)
		}
		seen = append(seen, off)
	}
	w := &reduceWorker{cfg: cfg}
	ctx := context.Background()

	s := w.hooked(&chunks{left: input()}, "src", 100)
	for {
		if _, err := s.Next(ctx); err != nil {
			break
		}
	}
	// The hook runs before each read, the one that finds the end too.
	if want := []int64{100, 104, 108, 110}; !slices.Equal(seen, want) {
		t.Fatalf("hook offsets %v, want %v", seen, want)
	}

	seen = nil
	in := &chunks{left: input()}
	into := w.hooked(in, "src", 0)
	dst := make([]byte, 10)
	for at := 0; at < len(dst); {
		n, err := into.NextInto(ctx, dst[at:])
		if err != nil {
			t.Fatal(err)
		}
		at += n
	}
	if want := []int64{0, 4, 8}; !slices.Equal(seen, want) {
		t.Fatalf("hook offsets %v, want %v", seen, want)
	}
	if in.into != 3 {
		t.Fatalf("a gather's NextInto under the hook made %d NextInto calls on its stream, want 3", in.into)
	}

	w.cfg = &Config{Self: cfg.Self}
	in = &chunks{}
	if s := w.hooked(in, "src", 0); s != transport.Stream(in) {
		t.Fatalf("without the hook the stream is wrapped: %T", s)
	}
}
