package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// underTest is one transport the stream contract runs against: serve
// serves src and returns the transport to open streams from, the address
// served and the checks only this transport adds.
type underTest struct {
	name  string
	serve func(t *testing.T, src Source) (Transport, string, extraChecks)
}

// extraChecks are what one transport promises beyond the contract, run
// after a contract test's streams are done (nil: nothing more).
type extraChecks struct {
	// sequential: after streams opened one after the other, all closed.
	sequential func(t *testing.T, src *fakeSource)
	// concurrent: after n streams open at once.
	concurrent func(t *testing.T, n int)
}

// transportsUnderTest are every transport: each passes the one contract.
func transportsUnderTest() []underTest {
	return []underTest{
		{"memory", func(t *testing.T, src Source) (Transport, string, extraChecks) {
			m := NewMemory(0)
			addr, err := m.Serve("a", src)
			if err != nil {
				t.Fatal(err)
			}
			if addr != "mem://a" {
				t.Fatalf("addr = %q", addr)
			}
			return m, addr, extraChecks{}
		}},
		{"tcp", func(t *testing.T, src Source) (Transport, string, extraChecks) {
			noLeaks(t)
			srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
			return cli, addr, extraChecks{
				sequential: func(t *testing.T, src *fakeSource) {
					// One connection carried every stream, one after the other.
					if d := cli.dials.Load(); d != 1 {
						t.Fatalf("%d dials for sequential streams, want 1", d)
					}
					if n := cli.poolSize(addr); n != 1 {
						t.Fatalf("pool holds %d connections, want 1", n)
					}
					eventually(t, "the sender closes every reader", func() bool { return src.openReaders() == 0 })
					if n := srv.server(addr).connCount(); n != 1 {
						t.Fatalf("server holds %d connections, want 1", n)
					}
				},
				concurrent: func(t *testing.T, n int) {
					if d := cli.dials.Load(); d != int64(n) {
						t.Fatalf("%d dials for %d concurrent streams", d, n)
					}
				},
			}
		}},
	}
}

// TestStreamContract runs the stream contract against every transport:
// chunking and resuming, empty objects and ids, pipelining a partial
// object, concurrent receivers, and deadlines.
func TestStreamContract(t *testing.T) {
	for _, tr := range transportsUnderTest() {
		t.Run(tr.name, func(t *testing.T) {
			t.Run("Chunks", func(t *testing.T) { contractChunks(t, tr) })
			t.Run("EmptyObject", func(t *testing.T) { contractEmptyObject(t, tr) })
			t.Run("PipelinesPartialObject", func(t *testing.T) { contractPipelinesPartialObject(t, tr) })
			t.Run("PipelinedConcurrent", func(t *testing.T) { contractPipelinedConcurrent(t, tr) })
			t.Run("NextRespectsDeadline", func(t *testing.T) { contractNextRespectsDeadline(t, tr) })
			t.Run("NextInto", func(t *testing.T) { contractNextInto(t, tr) })
		})
	}
}

// A complete object streams from any offset in chunks of at most the
// chunk size, each but the last full, then EOF for good; Close is
// idempotent and gives the reader back.
func contractChunks(t *testing.T, tr underTest) {
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(1000)
	src.add("o", complete(data))
	cli, addr, extra := tr.serve(t, src)
	for _, tc := range []struct {
		off    int64
		chunk  int
		chunks int
	}{
		{0, 64, 16},     // 15 full chunks + 40 bytes
		{0, 1000, 1},    // exactly one chunk
		{0, 5000, 1},    // chunk larger than the object
		{300, 128, 6},   // resume: 700 bytes
		{999, 10, 1},    // last byte
		{1000, 10, 0},   // at the end: EOF at once
		{0, 1, 1000},    // byte by byte
		{500, 250, 2},   // resume, chunk divides the rest
		{37, 100, 10},   // odd offset
		{0, 999, 2},     // one byte left over
		{1, 999, 1},     // exactly the rest
		{2, 999, 1},     // less than the rest
		{100, 900, 1},   // chunk equals the rest
		{100, 899, 2},   // one byte short
		{0, 333, 4},     // 3*333 = 999, +1
		{10, 330, 3},    // 990 = 3*330
		{0, 1 << 20, 1}, // huge chunk
		{0, 1 << 30, 1}, // above TCP's maxChunk: clamped
	} {
		s, err := cli.Open(ctx, "b", addr, "o", tc.off, tc.chunk)
		if err != nil {
			t.Fatalf("Open(off %d, chunk %d): %v", tc.off, tc.chunk, err)
		}
		if s.Size() != 1000 {
			t.Fatalf("Size() = %d", s.Size())
		}
		var got []byte
		n := 0
		for {
			b, err := s.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(b) == 0 || len(b) > tc.chunk {
				t.Fatalf("off %d chunk %d: chunk of %d bytes", tc.off, tc.chunk, len(b))
			}
			got = append(got, b...)
			n++
		}
		if !bytes.Equal(got, data[tc.off:]) {
			t.Fatalf("off %d chunk %d: got %d bytes, not data[%d:]", tc.off, tc.chunk, len(got), tc.off)
		}
		if n != tc.chunks {
			t.Fatalf("off %d chunk %d: %d chunks, want %d", tc.off, tc.chunk, n, tc.chunks)
		}
		for range 2 {
			if _, err := s.Next(ctx); err != io.EOF {
				t.Fatalf("Next after the end = %v, want io.EOF", err)
			}
		}
		s.Close()
		s.Close()
	}
	eventually(t, "every reader closed", func() bool { return src.openReaders() == 0 })
	if extra.sequential != nil {
		extra.sequential(t, src)
	}
}

// NextInto puts the chunks into the caller's memory, one after another,
// as Next yields them: consecutive slices of one buffer hold the object
// from the offset on; mixed with Next at chunk boundaries the stream goes
// on where it was; a buffer smaller than the next chunk is INTERNAL.
func contractNextInto(t *testing.T, tr underTest) {
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(1000)
	src.add("o", complete(data))
	cli, addr, _ := tr.serve(t, src)
	for _, tc := range []struct {
		off   int64
		chunk int
	}{{0, 64}, {0, 1000}, {300, 128}, {999, 10}, {37, 100}, {0, 1}, {0, 5000}} {
		s, err := cli.Open(ctx, "b", addr, "o", tc.off, tc.chunk)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 1000-tc.off)
		at, reads := 0, 0
		for {
			var n int
			var err error
			if reads%3 == 2 { // every third chunk by Next
				var b []byte
				if b, err = s.Next(ctx); err == nil {
					n = copy(buf[at:], b)
				}
			} else {
				n, err = s.NextInto(ctx, buf[at:])
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("off %d chunk %d at %d: %v", tc.off, tc.chunk, at, err)
			}
			if n < 1 || n > tc.chunk {
				t.Fatalf("off %d chunk %d: chunk of %d bytes", tc.off, tc.chunk, n)
			}
			at += n
			reads++
		}
		if at != len(buf) || !bytes.Equal(buf, data[tc.off:]) {
			t.Fatalf("off %d chunk %d: %d bytes, not data[%d:]", tc.off, tc.chunk, at, tc.off)
		}
		if n, err := s.NextInto(ctx, buf); n != 0 || err != io.EOF {
			t.Fatalf("NextInto after the end = %d, %v; want io.EOF", n, err)
		}
		s.Close()
	}
	s, err := cli.Open(ctx, "b", addr, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.NextInto(ctx, make([]byte, 99)); !errors.Is(err, messages.ErrInternal) {
		t.Fatalf("NextInto with a buffer smaller than a chunk = %v, want INTERNAL", err)
	}
}

// An empty object streams EOF at once; the empty id is an id like any.
func contractEmptyObject(t *testing.T, tr underTest) {
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("z", complete(nil))
	src.add("", complete(pattern(3)))
	cli, addr, _ := tr.serve(t, src)
	s, err := cli.Open(ctx, "", addr, "z", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != 0 {
		t.Fatalf("Size() = %d", s.Size())
	}
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("Next = %v, want io.EOF", err)
	}
	s2, err := cli.Open(ctx, "", addr, "", 1, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := drain(t, ctx, s2, 10); !bytes.Equal(got, pattern(3)[1:]) {
		t.Fatalf("empty id: got %v", got)
	}
}

// Bytes of an object still being written stream as they arrive, each
// append at once, bounded by the chunk size.
func contractPipelinesPartialObject(t *testing.T, tr underTest) {
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(100)
	o := newFakeObject(len(data))
	src.add("o", o)
	cli, addr, _ := tr.serve(t, src)
	s, err := cli.Open(ctx, "", addr, "o", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Size() != 100 {
		t.Fatalf("Size() = %d", s.Size())
	}
	type result struct {
		b   []byte
		err error
	}
	next := func() <-chan result {
		ch := make(chan result, 1)
		go func() {
			b, err := s.Next(ctx)
			ch <- result{bytes.Clone(b), err}
		}()
		return ch
	}
	off := 0
	for _, n := range []int{10, 1, 80, 9} {
		ch := next()
		select {
		case r := <-ch:
			t.Fatalf("Next returned before the bytes existed: %v, %v", r.b, r.err)
		default:
		}
		o.append(data[off : off+n])
		var r result
		select {
		case r = <-ch:
		case <-time.After(hangGuard):
			t.Fatal("Next did not return after Append")
		}
		want := data[off : off+min(n, 64)]
		if r.err != nil || !bytes.Equal(r.b, want) {
			t.Fatalf("Next = %v, %v; want %v", r.b, r.err, want)
		}
		off += len(r.b)
		if n > 64 { // the rest of this Append is there already
			b, err := s.Next(ctx)
			if err != nil || !bytes.Equal(b, data[off:off+n-64]) {
				t.Fatalf("second chunk = %v, %v", b, err)
			}
			off += len(b)
		}
	}
	if off != 100 {
		t.Fatalf("streamed %d bytes", off)
	}
	if _, err := s.Next(ctx); err != io.EOF {
		t.Fatalf("Next at the end = %v, want io.EOF", err)
	}
}

// Receivers with different chunk sizes stream one object while it is
// written, each getting every byte in order.
func contractPipelinedConcurrent(t *testing.T, tr underTest) {
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(4 << 20)
	o := newFakeObject(len(data))
	src.add("o", o)
	cli, addr, extra := tr.serve(t, src)
	const receivers = 4
	got := make([][]byte, receivers)
	errs := make([]error, receivers)
	var wg sync.WaitGroup
	for i := range receivers {
		chunk := 4096 + i*100000
		s, err := cli.Open(ctx, "", addr, "o", 0, chunk)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			for {
				b, err := s.Next(ctx)
				if err == io.EOF {
					return
				}
				if err != nil {
					errs[i] = err
					return
				}
				if len(b) > chunk {
					errs[i] = fmt.Errorf("chunk of %d bytes", len(b))
					return
				}
				got[i] = append(got[i], b...)
			}
		}()
	}
	for off := 0; off < len(data); off += 30000 {
		o.append(data[off:min(len(data), off+30000)])
	}
	wg.Wait()
	for i := range receivers {
		if errs[i] != nil {
			t.Fatalf("receiver %d: %v", i, errs[i])
		}
		if !bytes.Equal(got[i], data) {
			t.Fatalf("receiver %d got %d bytes, other than written", i, len(got[i]))
		}
	}
	if extra.concurrent != nil {
		extra.concurrent(t, receivers)
	}
}

// A Next that waits for bytes ends at its context's deadline (TIMEOUT)
// or cancellation (CANCELED), consuming nothing: the stream goes on.
func contractNextRespectsDeadline(t *testing.T, tr underTest) {
	src := newFakeSource()
	o := newFakeObject(100)
	o.append(pattern(10))
	src.add("o", o)
	cli, addr, _ := tr.serve(t, src)
	s, err := cli.Open(guardCtx(t), "", addr, "o", 0, 128)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Next(guardCtx(t)); err != nil || len(b) != 10 {
		t.Fatalf("Next = %d bytes, %v", len(b), err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrTimeout)

	cctx, ccancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(cctx)
		done <- err
	}()
	ccancel()
	select {
	case err := <-done:
		wantCode(t, err, messages.ErrCanceled)
	case <-time.After(hangGuard):
		t.Fatal("cancel did not end Next")
	}

	o.append(pattern(90)[10:])
	b, err := s.Next(guardCtx(t))
	if err != nil || !bytes.Equal(b, pattern(90)[10:]) {
		t.Fatalf("Next after timeout = %v, %v", b, err)
	}
}
