package transport

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// pullSource counts the sender's reads and whether each happened inside
// a receiver's Next (the test raises inNext around its calls).
type pullSource struct {
	*fakeSource
	inNext  atomic.Bool
	read    atomic.Int64 // bytes the sender read
	outside atomic.Int64 // reads made while no Next was running
}

func (s *pullSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	r, err := s.fakeSource.OpenObject(ctx, id)
	if err != nil {
		return nil, err
	}
	return &pullReader{ObjectReader: r, s: s}, nil
}

type pullReader struct {
	ObjectReader
	s *pullSource
}

func (r *pullReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	if !r.s.inNext.Load() {
		r.s.outside.Add(1)
	}
	b, err := r.ObjectReader.ReadAt(ctx, off, max)
	r.s.read.Add(int64(len(b)))
	return b, err
}

// TestMemorySlowReceiverBoundsSender: the in-memory data plane moves a
// chunk only when the receiver asks for it. A receiver that stops reading
// leaves nothing buffered on either side, however far the sender's copy
// grows meanwhile: the sender has read exactly the chunks handed over,
// only inside the receiver's Next calls, and each chunk is the sender's
// own memory, not a copy queued for the receiver.
func TestMemorySlowReceiverBoundsSender(t *testing.T) {
	ctx := guardCtx(t)
	const chunk, chunks = 64 << 10, 32
	data := pattern(chunk * chunks)
	src := &pullSource{fakeSource: newFakeSource()}
	o := newFakeObject(len(data))
	o.append(data[:4*chunk]) // a partial copy, still arriving
	src.add("o", o)
	m := NewMemory(1 << 30) // with an emulated link: pacing must not read ahead either
	addr, _ := m.Serve("sender", src)
	if _, err := m.Serve("receiver", newFakeSource()); err != nil {
		t.Fatal(err)
	}
	s, err := m.Open(ctx, "mem://receiver", addr, "o", 0, chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	off := 0
	next := func() []byte {
		t.Helper()
		src.inNext.Store(true)
		defer src.inNext.Store(false)
		b, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("Next at %d: %v", off, err)
		}
		if len(b) != chunk || string(b) != string(data[off:off+chunk]) {
			t.Fatalf("chunk at %d: %d bytes, not the object's", off, len(b))
		}
		if &b[0] != &o.buf[off] {
			t.Fatalf("chunk at %d is a copy, not the sender's memory", off)
		}
		off += len(b)
		return b
	}
	for range 2 {
		next()
	}
	// The receiver stalls while the sender's copy completes. Nothing may
	// read on the receiver's behalf: a read-ahead would show here (the
	// pause gives it a chance; it cannot make a correct transport fail).
	o.append(data[4*chunk:])
	time.Sleep(50 * time.Millisecond)
	if r, out := src.read.Load(), src.outside.Load(); r != 2*chunk || out != 0 {
		t.Fatalf("stalled receiver: the sender read %d bytes (%d reads outside Next), want exactly the %d handed over", r, out, 2*chunk)
	}
	// Resuming, the receiver gets every byte; each read served one Next.
	for off < len(data) {
		next()
	}
	src.inNext.Store(true)
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("Next at the end: %v, want EOF", err)
	}
	src.inNext.Store(false)
	if r, out := src.read.Load(), src.outside.Load(); r != int64(len(data)) || out != 0 {
		t.Fatalf("the sender read %d of %d bytes, %d reads outside Next", r, len(data), out)
	}
}
