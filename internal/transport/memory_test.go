package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// hangGuard bounds waits for things that must happen: a safety net
// against hangs, never a timing assertion.
const hangGuard = 10 * time.Second

// fakeObject is a minimal growing object with the ObjectReader semantics
// of the real store (storenode imports this package, so it cannot be used
// here).
type fakeObject struct {
	mu      sync.Mutex
	buf     []byte
	written int
	err     error
	changed chan struct{}
}

func newFakeObject(size int) *fakeObject {
	return &fakeObject{buf: make([]byte, size), changed: make(chan struct{})}
}

func (o *fakeObject) append(p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.written += copy(o.buf[o.written:], p)
	close(o.changed)
	o.changed = make(chan struct{})
}

func (o *fakeObject) readAt(ctx context.Context, off int64, max int) ([]byte, error) {
	for {
		o.mu.Lock()
		written, err, ch := o.written, o.err, o.changed
		o.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if off >= int64(len(o.buf)) {
			return nil, io.EOF
		}
		if int64(written) > off {
			end := min(int64(written), off+int64(max))
			return o.buf[off:end:end], nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, messages.AsError(ctx.Err())
		}
	}
}

type fakeSource struct {
	mu      sync.Mutex
	objects map[string]*fakeObject
	open    int // readers not closed yet
}

func newFakeSource() *fakeSource { return &fakeSource{objects: map[string]*fakeObject{}} }

func (s *fakeSource) add(id string, o *fakeObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[id] = o
}

func (s *fakeSource) openReaders() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

func (s *fakeSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[id]
	if o == nil {
		return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "no object %q", id)
	}
	s.open++
	return &fakeReader{s: s, o: o}, nil
}

type fakeReader struct {
	s    *fakeSource
	o    *fakeObject
	once sync.Once
}

func (r *fakeReader) Size() int64 { return int64(len(r.o.buf)) }
func (r *fakeReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	return r.o.readAt(ctx, off, max)
}
func (r *fakeReader) Close() {
	r.once.Do(func() {
		r.s.mu.Lock()
		r.s.open--
		r.s.mu.Unlock()
	})
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31 + i>>8)
	}
	return b
}

func complete(data []byte) *fakeObject {
	o := newFakeObject(len(data))
	o.append(data)
	return o
}

func guardCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func wantCode(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error = %v, want %v", err, target)
	}
}

// drain reads s to the end, checking every chunk's size.
func drain(t *testing.T, ctx context.Context, s Stream, chunk int) []byte {
	t.Helper()
	var got []byte
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatalf("Next after %d bytes: %v", len(got), err)
		}
		if len(b) == 0 || len(b) > chunk {
			t.Fatalf("chunk of %d bytes, want 1..%d", len(b), chunk)
		}
		got = append(got, b...)
	}
}

func TestMemoryOpenErrors(t *testing.T) {
	ctx := guardCtx(t)
	m := NewMemory(0)
	src := newFakeSource()
	src.add("o", complete(pattern(100)))
	addr, _ := m.Serve("a", src)

	_, err := m.Open(ctx, "", "mem://nowhere", "o", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = m.Open(ctx, "", addr, "missing", 0, 10)
	wantCode(t, err, messages.ErrNotFound)
	for _, off := range []int64{-1, 101, 1 << 40} {
		_, err = m.Open(ctx, "", addr, "o", off, 10)
		wantCode(t, err, messages.ErrInvalidArgument)
	}
	for _, chunk := range []int{0, -1} {
		_, err = m.Open(ctx, "", addr, "o", 0, chunk)
		wantCode(t, err, messages.ErrInvalidArgument)
	}
	// Rejected opens release the reader they took.
	if n := src.openReaders(); n != 0 {
		t.Fatalf("%d readers left open by failed Opens", n)
	}
}

func TestMemoryUnserve(t *testing.T) {
	ctx := guardCtx(t)
	m := NewMemory(0)
	src := newFakeSource()
	src.add("o", complete(pattern(100)))
	addr, _ := m.Serve("a", src)
	s, err := m.Open(ctx, "", addr, "o", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	m.Unserve(addr)
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = m.Open(ctx, "", addr, "o", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)
	m.Unserve(addr) // twice, and unknown: harmless
	m.Unserve("mem://nowhere")

	// Serving a node again replaces the old endpoint: streams from the
	// old one fail, new ones work.
	addr, _ = m.Serve("a", src)
	s1, err := m.Open(ctx, "", addr, "o", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if _, err := m.Serve("a", src); err != nil {
		t.Fatal(err)
	}
	_, err = s1.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	s2, err := m.Open(ctx, "", addr, "o", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b, err := s2.Next(ctx); err != nil || len(b) != 10 {
		t.Fatalf("Next on the new endpoint = %d bytes, %v", len(b), err)
	}
}

func linkNext(l *link) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next
}

func TestLinkBook(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	l := &link{bps: 1000} // 1 byte per ms
	for _, step := range []struct {
		now  time.Duration
		n    int
		want time.Duration
	}{
		{0, 500, 500 * ms},                  // idle link: starts now
		{0, 1000, 1500 * ms},                // serialized after the first
		{100 * ms, 250, 1750 * ms},          // still busy: queued, not at now
		{1750 * ms, 0, 1750 * ms},           // zero bytes take no time
		{10 * time.Second, 100, 10100 * ms}, // idle again: starts now
		{10100 * ms, 1, 10101 * ms},         // exactly when free
	} {
		if got := l.book(t0.Add(step.now), step.n); !got.Equal(t0.Add(step.want)) {
			t.Fatalf("book(t0+%v, %d) = t0+%v, want t0+%v", step.now, step.n, got.Sub(t0), step.want)
		}
	}

	// Unlimited links never wait and keep no bookings.
	for _, bps := range []float64{0, -5} {
		u := &link{bps: bps}
		for range 3 {
			if got := u.book(t0, 1<<30); !got.Equal(t0) {
				t.Fatalf("bps %v: book = t0+%v, want t0", bps, got.Sub(t0))
			}
		}
		if !u.next.IsZero() {
			t.Fatalf("bps %v: booking recorded", bps)
		}
	}
	var nilLink *link
	if got := nilLink.book(t0, 100); !got.Equal(t0) {
		t.Fatalf("nil link: book = t0+%v", got.Sub(t0))
	}

	// Rate: 1 MiB at 1 GiB/s is 1/1024 s.
	g := &link{bps: 1 << 30}
	if got := g.book(t0, 1<<20).Sub(t0); got != time.Second/1024 {
		t.Fatalf("1 MiB at 1 GiB/s = %v", got)
	}
}

func TestPaceWaitsForTheLaterLink(t *testing.T) {
	far := time.Now().Add(time.Hour)
	short := func() context.Context {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		t.Cleanup(cancel)
		return ctx
	}

	// Uplink busy for an hour, downlink idle: pace waits for the uplink.
	up := &link{bps: 1000, next: far}
	down := &link{bps: 1000}
	before := time.Now()
	wantCode(t, pace(short(), up, down, 500), messages.ErrTimeout)
	after := time.Now()
	if got := linkNext(up); !got.Equal(far.Add(500 * time.Millisecond)) {
		t.Fatalf("uplink booked until %v, want far+500ms", got.Sub(far))
	}
	// Both links are booked with the same now.
	if got := linkNext(down); got.Before(before.Add(500*time.Millisecond)) || got.After(after.Add(500*time.Millisecond)) {
		t.Fatalf("downlink booked until now%+v, want now+500ms", time.Until(got))
	}

	// Downlink busy, uplink idle: pace waits for the downlink.
	up = &link{bps: 1000}
	down = &link{bps: 1000, next: far}
	wantCode(t, pace(short(), up, down, 1), messages.ErrTimeout)
	// Unlimited uplink, busy downlink: still waits.
	wantCode(t, pace(short(), &link{}, down, 1), messages.ErrTimeout)
	// No receiver link at all: only the uplink counts.
	wantCode(t, pace(short(), &link{bps: 1000, next: far}, nil, 1), messages.ErrTimeout)

	// Both idle with a fast link, or unlimited: no wait (a wait would
	// run into the guard deadline and fail).
	if err := pace(guardCtx(t), &link{}, nil, 1<<30); err != nil {
		t.Fatalf("unlimited pace: %v", err)
	}
	if err := pace(guardCtx(t), &link{}, &link{}, 1<<30); err != nil {
		t.Fatalf("unlimited pace: %v", err)
	}
	if err := pace(guardCtx(t), &link{bps: 1 << 40}, &link{bps: 1 << 40}, 1); err != nil {
		t.Fatalf("fast pace: %v", err)
	}
}

func TestMemoryStreamIsPaced(t *testing.T) {
	// 1 byte/s: a 1000-byte chunk books both links ~1000 s ahead, so
	// Next runs into its deadline. The stream's bytes cross the sender's
	// uplink and the receiver's downlink.
	m := NewMemory(1)
	src := newFakeSource()
	src.add("o", complete(pattern(1000)))
	addr, _ := m.Serve("a", src)
	self, _ := m.Serve("b", newFakeSource())
	s, err := m.Open(guardCtx(t), self, addr, "o", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrTimeout)
	a, b := m.node(addr), m.node(self)
	for _, c := range []struct {
		name string
		l    *link
		want bool
	}{
		{"sender uplink", &a.up, true},
		{"receiver downlink", &b.down, true},
		{"sender downlink", &a.down, false},
		{"receiver uplink", &b.up, false},
	} {
		booked := linkNext(c.l).After(before.Add(999 * time.Second))
		if booked != c.want {
			t.Fatalf("%s booked until now%+v; want booked=%v", c.name, time.Until(linkNext(c.l)), c.want)
		}
	}
	if m.LinkBandwidth != 1 || a.up.bps != 1 || b.down.bps != 1 {
		t.Fatal("link bandwidth not taken from NewMemory")
	}
}

const (
	benchSize  = 64 << 20
	benchChunk = 1 << 20
)

// BenchmarkMemoryStream streams a 64 MiB object in 1 MiB chunks through
// Memory (unlimited bandwidth), copying each chunk into a destination
// buffer as a receiving store does. Compare with BenchmarkPlainCopy.
func BenchmarkMemoryStream(b *testing.B) {
	data := pattern(benchSize)
	dst := make([]byte, benchSize)
	m := NewMemory(0)
	src := newFakeSource()
	src.add("o", complete(data))
	addr, _ := m.Serve("a", src)
	self, _ := m.Serve("b", newFakeSource())
	ctx := b.Context()
	b.SetBytes(benchSize)
	for b.Loop() {
		s, err := m.Open(ctx, self, addr, "o", 0, benchChunk)
		if err != nil {
			b.Fatal(err)
		}
		off := 0
		for {
			c, err := s.Next(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			off += copy(dst[off:], c)
		}
		s.Close()
		if off != benchSize {
			b.Fatalf("streamed %d bytes", off)
		}
	}
}

// BenchmarkPlainCopy copies the same 64 MiB with copy() in 1 MiB chunks.
func BenchmarkPlainCopy(b *testing.B) {
	data := pattern(benchSize)
	dst := make([]byte, benchSize)
	b.SetBytes(benchSize)
	for b.Loop() {
		for off := 0; off < benchSize; off += benchChunk {
			copy(dst[off:off+benchChunk], data[off:off+benchChunk])
		}
	}
}

// A receiver that is not served itself can still stream.
func TestMemoryUnservedReceiverStreams(t *testing.T) {
	ctx := guardCtx(t)
	m := NewMemory(0)
	src := newFakeSource()
	data := pattern(1000)
	src.add("o", complete(data))
	addr, err := m.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.Open(ctx, "mem://nobody", addr, "o", 0, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := drain(t, ctx, s, 256); !bytes.Equal(got, data) {
		t.Fatal("unserved receiver got other bytes")
	}
}
