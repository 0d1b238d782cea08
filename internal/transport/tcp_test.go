package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hoplite-go/hoplite/messages"
)

// The fake Source (fakeSource, fakeObject, complete, pattern), guardCtx,
// wantCode and drain come from memory_test.go: the same package.

// noLeaks fails the test if goroutines started during it are still
// running once its cleanups (registered later, so run earlier) are done.
func noLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(hangGuard)
		for runtime.NumGoroutine() > base {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				t.Fatalf("%d goroutines left running (had %d):\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
}

// eventually polls cond until it holds, failing after hangGuard.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(hangGuard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// bigPattern is pattern(1 MiB) repeated, each MiB stamped with its index
// so that a misplaced block shows (pattern itself is slow under -race).
func bigPattern(n int) []byte {
	block := pattern(1 << 20)
	b := make([]byte, n)
	for off := 0; off < n; off += len(block) {
		m := copy(b[off:], block)
		if m >= 8 {
			binary.BigEndian.PutUint64(b[off:], uint64(off))
		}
	}
	return b
}

// logSink collects a transport's log lines.
type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) has(sub string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.lines {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// newTCP returns a transport closed when t ends. Unless cfg sets
// MinChunk, it serves and asks chunks of any size, so that a test cuts a
// small object into many frames.
func newTCP(t *testing.T, cfg TCPConfig) *TCP {
	if cfg.MinChunk == 0 {
		cfg.MinChunk = 1
	}
	tr := NewTCP(cfg)
	t.Cleanup(tr.Close)
	return tr
}

// tcpPair serves src from one transport and returns another to open
// streams from (the peers of different processes).
func tcpPair(t *testing.T, src Source, server, client TCPConfig) (srv, cli *TCP, addr string) {
	t.Helper()
	srv = newTCP(t, server)
	cli = newTCP(t, client)
	addr, err := srv.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") || strings.HasSuffix(addr, ":0") {
		t.Fatalf("data address %q", addr)
	}
	return srv, cli, addr
}

func (t *TCP) server(addr string) *tcpServer {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.servers[addr]
}

// relayedPayload is how many payload bytes the pooled connections to
// addr copied through their own buffers (connReader.relayed).
func (t *TCP) relayedPayload(addr string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var n int64
	for _, c := range t.pool[addr] {
		n += c.r.relayed
	}
	return n
}

func (t *TCP) activeConns() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.active)
}

func TestTCPOpenErrors(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("o", complete(pattern(100)))
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	_, err = cli.Open(ctx, "", dead, "o", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)

	_, err = cli.Open(ctx, "", addr, "missing", 0, 10)
	wantCode(t, err, messages.ErrNotFound)
	if !strings.Contains(err.Error(), `"missing"`) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("error %q names neither the object nor the peer", err)
	}
	for _, off := range []int64{-1, 101, 1 << 40, 1<<63 - 1} {
		_, err = cli.Open(ctx, "", addr, "o", off, 10)
		wantCode(t, err, messages.ErrInvalidArgument)
	}
	for _, chunk := range []int{0, -1} {
		_, err = cli.Open(ctx, "", addr, "o", 0, chunk)
		wantCode(t, err, messages.ErrInvalidArgument)
	}
	_, err = cli.Open(ctx, "", addr, strings.Repeat("x", maxIDLen+1), 0, 10)
	wantCode(t, err, messages.ErrInvalidArgument)
	// An id at the cap is fine (and unknown).
	_, err = cli.Open(ctx, "", addr, strings.Repeat("x", maxIDLen), 0, 10)
	wantCode(t, err, messages.ErrNotFound)

	// Error answers leave the connection in step: it was reused.
	if d := cli.dials.Load(); d != 1 {
		t.Fatalf("%d dials, want 1", d)
	}
	s, err := cli.Open(ctx, "", addr, "o", 0, 30)
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, ctx, s, 30); !bytes.Equal(got, pattern(100)) {
		t.Fatal("stream after errors got other bytes")
	}
	s.Close()
	eventually(t, "rejected opens release their readers", func() bool { return src.openReaders() == 0 })

	// An expired context fails Open with TIMEOUT.
	expired, cancel := context.WithTimeout(ctx, -time.Second)
	defer cancel()
	_, err = cli.Open(expired, "", addr, "o", 0, 10)
	wantCode(t, err, messages.ErrTimeout)
}

func TestTCPServeErrors(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("o", complete(pattern(100)))
	tr := newTCP(t, TCPConfig{})
	addr, err := tr.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	// A port already in use.
	other := newTCP(t, TCPConfig{ListenAddr: HostPort(addr)})
	_, err = other.Serve("b", src)
	wantCode(t, err, messages.ErrUnavailable)
	if !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("error %q does not say the port is in use", err)
	}
	_, err = tr.Serve("n", nil)
	wantCode(t, err, messages.ErrInvalidArgument)

	// Serving a node again replaces its endpoint: streams from the old
	// one fail, new ones work.
	o := newFakeObject(100)
	o.append(pattern(10))
	src.add("p", o)
	s1, err := tr.Open(ctx, "", addr, "p", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	if b, err := s1.Next(ctx); err != nil || len(b) != 10 {
		t.Fatalf("Next = %d bytes, %v", len(b), err)
	}
	addr2, err := tr.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s1.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = tr.Open(ctx, "", addr, "o", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)
	s2, err := tr.Open(ctx, "", addr2, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := drain(t, ctx, s2, 100); !bytes.Equal(got, pattern(100)) {
		t.Fatal("new endpoint got other bytes")
	}

	// A fixed port can be served again after Unserve, as a new
	// incarnation (TestTCPRequestForAnotherIncarnation).
	tr.Unserve(addr2)
	fixed := newTCP(t, TCPConfig{ListenAddr: HostPort(addr2)})
	if got, err := fixed.Serve("c", src); err != nil || HostPort(got) != HostPort(addr2) || got == addr2 {
		t.Fatalf("Serve on the freed port = %q, %v (the old endpoint was %q)", got, err, addr2)
	}

	tr.Close()
	tr.Close()
	_, err = tr.Serve("a", src)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = tr.Open(ctx, "", addr2, "o", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)
	tr.Unserve("127.0.0.1:1") // unknown: harmless
}

func TestTCPUnserve(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	o := newFakeObject(100)
	o.append(pattern(10))
	src.add("partial", o)
	big := bigPattern(64 << 20)
	src.add("big", complete(big))
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})

	// A sender waiting for its partial copy.
	s, err := cli.Open(ctx, "", addr, "partial", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Next(ctx); err != nil || len(b) != 10 {
		t.Fatalf("Next = %d bytes, %v", len(b), err)
	}
	// A sender writing more than the socket buffers hold.
	sb, err := cli.Open(ctx, "", addr, "big", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	var got []byte
	b, err := sb.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, b...)

	srv.Unserve(addr)
	if srv.server(addr) != nil {
		t.Fatal("server still registered")
	}
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = s.Next(ctx) // final
	wantCode(t, err, messages.ErrUnavailable)
	for {
		b, err := sb.Next(ctx)
		if err != nil {
			wantCode(t, err, messages.ErrUnavailable)
			break
		}
		got = append(got, b...)
	}
	if len(got) >= len(big) || !bytes.Equal(got, big[:len(got)]) {
		t.Fatalf("got %d bytes before the failure; want a strict prefix", len(got))
	}
	_, err = cli.Open(ctx, "", addr, "partial", 0, 10)
	wantCode(t, err, messages.ErrUnavailable)
	srv.Unserve(addr) // twice, and unknown: harmless
	srv.Unserve("127.0.0.1:1")
	eventually(t, "readers closed", func() bool { return src.openReaders() == 0 })
	if n := cli.activeConns(); n != 0 {
		t.Fatalf("%d client connections still active", n)
	}
}

// TestTCPNextTimeoutMidFrame: a deadline that expires halfway through a
// frame keeps the half read; the next Next completes the same chunk.
func TestTCPNextTimeoutMidFrame(t *testing.T) {
	noLeaks(t)
	data := pattern(1000)
	release := make(chan struct{})
	addr := fakePeer(t, func(c net.Conn, req tcpRequest) {
		w := respond(1000)
		w = appendFrameHeader(w, frameData, 1000)
		c.Write(append(w, data[:400]...))
		<-release
		c.Write(data[400:])
		readUntilEOF(c)
	})
	cli := newTCP(t, TCPConfig{})
	s, err := cli.Open(guardCtx(t), "", addr, "o", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrTimeout)
	close(release)
	b, err := s.Next(guardCtx(t))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Next after a mid-frame timeout = %d bytes, %v", len(b), err)
	}
	if _, err := s.Next(guardCtx(t)); err != io.EOF {
		t.Fatalf("Next at the end = %v", err)
	}
}

// blockingSource's OpenObject waits until open is closed or ctx ends,
// like a store learning an announced object's size.
type blockingSource struct {
	*fakeSource
	open  chan struct{}
	calls atomic.Int64
}

func (s *blockingSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	s.calls.Add(1)
	select {
	case <-s.open:
		return s.fakeSource.OpenObject(ctx, id)
	case <-ctx.Done():
		return nil, messages.AsError(ctx.Err())
	}
}

// TestTCPKeepalives: a sender waiting for its copy (in OpenObject or in
// ReadAt) for many times the receiver's StallTimeout keeps the stream
// alive with keepalives.
func TestTCPKeepalives(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	bs := &blockingSource{fakeSource: newFakeSource(), open: make(chan struct{})}
	data := pattern(100)
	o := newFakeObject(len(data))
	bs.add("o", o)
	const stall = 150 * time.Millisecond
	srv, cli, addr := tcpPair(t, bs, TCPConfig{}, TCPConfig{StallTimeout: stall})

	type opened struct {
		s   Stream
		err error
	}
	och := make(chan opened, 1)
	go func() {
		s, err := cli.Open(ctx, "", addr, "o", 0, 64)
		och <- opened{s, err}
	}()
	// Keepalives come every stall/3: six of them span twice the stall.
	eventually(t, "keepalives while opening", func() bool { return srv.keepalives.Load() >= 6 })
	select {
	case r := <-och:
		t.Fatalf("Open returned while the sender waited: %v", r.err)
	default:
	}
	close(bs.open)
	var r opened
	select {
	case r = <-och:
	case <-time.After(hangGuard):
		t.Fatal("Open did not return")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	s := r.s
	defer s.Close()

	b, err := nextThroughKeepalives(t, ctx, s, srv, 6, func() { o.append(data) })
	if err != nil || !bytes.Equal(b, data[:64]) {
		t.Fatalf("Next = %v, %v", b, err)
	}
	if got := drain(t, ctx, s, 64); !bytes.Equal(got, data[64:]) {
		t.Fatal("rest of the stream differs")
	}
}

// nextThroughKeepalives calls s.Next while the sender srv has nothing to
// send: it must not return before srv sent n more keepalives; then
// feed gives the sender bytes, and Next's result is returned.
func nextThroughKeepalives(t *testing.T, ctx context.Context, s Stream, srv *TCP, n int64, feed func()) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := s.Next(ctx)
		ch <- result{bytes.Clone(b), err}
	}()
	k := srv.keepalives.Load()
	eventually(t, "keepalives while reading", func() bool { return srv.keepalives.Load() >= k+n })
	select {
	case r := <-ch:
		t.Fatalf("Next returned while the sender waited: %v", r.err)
	default:
	}
	feed()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-time.After(hangGuard):
		t.Fatal("Next did not return")
		return nil, nil
	}
}

// TestTCPKeepalivesAfterAWholeChunk: after a whole chunk a receiver
// waits for the next header and a whole chunk behind it (ReadHeader); a
// sender that then has nothing but keepalives for several times the
// receiver's StallTimeout still keeps the stream alive, and the bytes
// that come after arrive exact.
func TestTCPKeepalivesAfterAWholeChunk(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	const chunk = 4096
	data, o, src := firstChunkOfThree(chunk)
	const stall = 150 * time.Millisecond
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{StallTimeout: stall})
	s, err := cli.Open(ctx, "", addr, "o", 0, chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Next(ctx); err != nil || !bytes.Equal(b, data[:chunk]) {
		t.Fatalf("first chunk: %d bytes, %v", len(b), err)
	}
	// Keepalives come every stall/3: nine of them span three stalls.
	b, err := nextThroughKeepalives(t, ctx, s, srv, 9, func() { o.append(data[chunk:]) })
	if err != nil || !bytes.Equal(b, data[chunk:2*chunk]) {
		t.Fatalf("second chunk: %d bytes, %v", len(b), err)
	}
	if got := drain(t, ctx, s, chunk); !bytes.Equal(got, data[2*chunk:]) {
		t.Fatal("rest of the stream differs")
	}
}

// firstChunkOfThree is an object "o" of three chunks of which only the
// first is there yet, and the source that serves it.
func firstChunkOfThree(chunk int) (data []byte, o *fakeObject, src *fakeSource) {
	data = pattern(3 * chunk)
	o = newFakeObject(len(data))
	o.append(data[:chunk])
	src = newFakeSource()
	src.add("o", o)
	return data, o, src
}

// TestTCPErrorAfterAWholeChunk: an error frame behind a whole chunk
// reaches the receiver, whose header read waits for a whole chunk more
// (ReadHeader), without waiting for its stall timeout.
func TestTCPErrorAfterAWholeChunk(t *testing.T) {
	noLeaks(t)
	const chunk = 4096
	data, o, src := firstChunkOfThree(chunk)
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{StallTimeout: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	s, err := cli.Open(ctx, "", addr, "o", 0, chunk)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if b, err := s.Next(ctx); err != nil || !bytes.Equal(b, data[:chunk]) {
		t.Fatalf("first chunk: %d bytes, %v", len(b), err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // the receiver is waiting by now
		o.mu.Lock()
		o.err = messages.Errorf(messages.ErrorCode_RESET, "object rewound")
		close(o.changed)
		o.changed = make(chan struct{})
		o.mu.Unlock()
	}()
	if _, err := s.Next(ctx); !errors.Is(err, messages.ErrReset) {
		t.Fatalf("Next after the sender failed = %v, want its RESET (not the caller's deadline)", err)
	}
}

func TestTCPConnectionReuse(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(10000)
	src.add("o", complete(data))
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{MaxConnsPerPeer: 2})

	for range 5 {
		s, err := cli.Open(ctx, "", addr, "o", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if got := drain(t, ctx, s, 1000); !bytes.Equal(got, data) {
			t.Fatal("other bytes")
		}
		s.Close()
	}
	if d := cli.dials.Load(); d != 1 {
		t.Fatalf("%d dials for 5 sequential streams", d)
	}

	// A stream closed before its end does not give its connection back,
	// even with nothing in flight (its sender waits for a partial copy).
	half := newFakeObject(2000)
	half.append(data[:1000])
	src.add("half", half)
	s, err := cli.Open(ctx, "", addr, "half", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := s.Next(ctx); !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("Next after Close = %v", err)
	}
	if n := cli.poolSize(addr); n != 0 {
		t.Fatalf("a half-read connection was pooled (%d)", n)
	}

	// Concurrent streams dial their own; the pool keeps MaxConnsPerPeer.
	var streams []Stream
	for range 5 {
		s, err := cli.Open(ctx, "", addr, "o", 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	if d := cli.dials.Load(); d != 6 {
		t.Fatalf("%d dials, want 6", d)
	}
	for _, s := range streams {
		if got := drain(t, ctx, s, 1000); !bytes.Equal(got, data) {
			t.Fatal("other bytes")
		}
		s.Close()
	}
	if n := cli.poolSize(addr); n != 2 {
		t.Fatalf("pool holds %d connections, want MaxConnsPerPeer 2", n)
	}
	if n := cli.activeConns(); n != 0 {
		t.Fatalf("%d connections still active", n)
	}
}

// TestTCPStalePooledConnection: a pooled connection that the server
// closed while idle is replaced transparently.
func TestTCPStalePooledConnection(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("o", complete(pattern(100)))
	srv, cli, addr := tcpPair(t, src, TCPConfig{IdleTimeout: 20 * time.Millisecond}, TCPConfig{IdleTimeout: time.Hour})
	for i := range 2 {
		s, err := cli.Open(ctx, "", addr, "o", 0, 100)
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		if got := drain(t, ctx, s, 100); !bytes.Equal(got, pattern(100)) {
			t.Fatal("other bytes")
		}
		s.Close()
		if n := cli.poolSize(addr); n != 1 {
			t.Fatalf("pool holds %d", n)
		}
		eventually(t, "the server closes the idle connection", func() bool { return srv.server(addr).connCount() == 0 })
	}
	if d := cli.dials.Load(); d != 2 {
		t.Fatalf("%d dials, want 2 (one per server-side idle close)", d)
	}
}

// trackingSource records how far the sender has read.
type trackingSource struct {
	*fakeSource
	high atomic.Int64
}

func (s *trackingSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	r, err := s.fakeSource.OpenObject(ctx, id)
	if err != nil {
		return nil, err
	}
	return &trackingReader{ObjectReader: r, s: s}, nil
}

type trackingReader struct {
	ObjectReader
	s *trackingSource
}

func (r *trackingReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	b, err := r.ObjectReader.ReadAt(ctx, off, max)
	end := off + int64(len(b))
	for {
		h := r.s.high.Load()
		if end <= h || r.s.high.CompareAndSwap(h, end) {
			return b, err
		}
	}
}

// TestTCPSlowReceiverBoundsSender: a receiver that stops reading blocks
// the sender in Write (it reads no further ahead than the socket buffers
// hold) until StallTimeout, when the sender drops the connection.
func TestTCPSlowReceiverBoundsSender(t *testing.T) {
	noLeaks(t)
	ts := &trackingSource{fakeSource: newFakeSource()}
	const size = 128 << 20
	data := bigPattern(size)
	ctx := guardCtx(t)
	ts.add("o", complete(data))
	var log logSink
	srv, cli, addr := tcpPair(t, ts, TCPConfig{StallTimeout: 200 * time.Millisecond, Log: log.logf}, TCPConfig{})
	s, err := cli.Open(ctx, "", addr, "o", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	b, err := s.Next(ctx)
	if err != nil || !bytes.Equal(b, data[:1<<20]) {
		t.Fatalf("first chunk: %d bytes, %v", len(b), err)
	}
	got := len(b)
	// Stop reading.
	eventually(t, "the sender drops the stalled connection", func() bool { return srv.server(addr).connCount() == 0 })
	if !log.has("stopped reading") {
		t.Fatalf("no stall logged: %q", log.lines)
	}
	high := ts.high.Load()
	if high >= size/4 {
		t.Fatalf("sender read %d of %d bytes ahead of a receiver that stopped", high, size)
	}
	t.Logf("sender read %d MiB ahead of a stopped receiver", high>>20)
	eventually(t, "readers closed", func() bool { return ts.openReaders() == 0 })
	// The receiver gets what was in flight, then a typed error.
	for {
		b, err := s.Next(ctx)
		if err != nil {
			wantCode(t, err, messages.ErrUnavailable)
			break
		}
		if !bytes.Equal(b, data[got:got+len(b)]) {
			t.Fatalf("bytes at %d differ", got)
		}
		got += len(b)
	}
	if int64(got) > high {
		t.Fatalf("received %d bytes, more than the sender read (%d)", got, high)
	}
}

// ---------------------------------------------------------------- malicious peers

// fakePeer listens on 127.0.0.1 and hands each connection, after reading
// its request, to serve. It ends with the test.
func fakePeer(t *testing.T, serve func(c net.Conn, req tcpRequest)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(hangGuard))
				var h [reqHeaderLen]byte
				if _, err := io.ReadFull(c, h[:]); err != nil {
					return
				}
				req := parseRequestHeader(&h)
				id := make([]byte, req.idLen)
				if _, err := io.ReadFull(c, id); err != nil {
					return
				}
				req.id = string(id)
				serve(c, req)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// respond is a conforming preamble and size frame.
func respond(size int64) []byte {
	b := appendPreamble(nil)
	b = appendFrameHeader(b, frameSize, 8)
	return binary.BigEndian.AppendUint64(b, uint64(size))
}

func errFrame(code uint16, msg string) []byte {
	b := appendFrameHeader(nil, frameError, 2+len(msg))
	b = binary.BigEndian.AppendUint16(b, code)
	return append(b, msg...)
}

func dataFrame(p []byte) []byte {
	return append(appendFrameHeader(nil, frameData, len(p)), p...)
}

func readUntilEOF(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(hangGuard))
	io.Copy(io.Discard, c)
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestTCPMaliciousServer(t *testing.T) {
	noLeaks(t)
	data := pattern(100)
	type tc struct {
		name   string
		script []byte
		// after the script: 0 close, 1 reset, 2 hold until the client closes
		then     int
		offset   int64
		wantOpen error  // Open's error, or nil
		wantNext error  // the error ending the stream
		valid    int    // bytes the stream delivers before it
		msg      string // in the error
	}
	cases := []tc{
		{name: "garbage", script: []byte("HTTP/1.1 400 Bad Request\r\n\r\n"), wantOpen: messages.ErrUnavailable, msg: "magic"},
		{name: "wrong magic", script: cat([]byte("XXXX\x00\x01"), respond(100)[6:]), wantOpen: messages.ErrUnavailable, msg: "magic"},
		{name: "wrong version", script: []byte("HPDR\x00\x07"), wantOpen: messages.ErrUnavailable, msg: "version 7"},
		{name: "close at once", wantOpen: messages.ErrUnavailable},
		{name: "reset at once", then: 1, wantOpen: messages.ErrUnavailable},
		{name: "close after preamble", script: appendPreamble(nil), wantOpen: messages.ErrUnavailable},
		{name: "truncated size frame", script: respond(100)[:9], wantOpen: messages.ErrUnavailable},
		{name: "size frame of 4 bytes", script: cat(appendPreamble(nil), appendFrameHeader(nil, frameSize, 4), []byte{0, 0, 0, 1}), wantOpen: messages.ErrUnavailable},
		{name: "negative size", script: respond(-5), wantOpen: messages.ErrUnavailable},
		{name: "size below offset", script: respond(10), offset: 50, wantOpen: messages.ErrUnavailable},
		{name: "data before size", script: cat(appendPreamble(nil), dataFrame(data[:10])), wantOpen: messages.ErrUnavailable},
		{name: "unknown frame", script: cat(appendPreamble(nil), appendFrameHeader(nil, 'Z', 0)), wantOpen: messages.ErrUnavailable},
		{name: "huge unknown frame", script: cat(appendPreamble(nil), appendFrameHeader(nil, 'Z', 1<<32-1)), wantOpen: messages.ErrUnavailable},
		{name: "keepalive with payload", script: cat(appendPreamble(nil), appendFrameHeader(nil, frameKeepalive, 3), []byte("abc")), wantOpen: messages.ErrUnavailable},
		{name: "error frame code OK", script: cat(appendPreamble(nil), errFrame(0, "fine")), wantOpen: messages.ErrUnavailable},
		{name: "error frame unknown code", script: cat(appendPreamble(nil), errFrame(999, "what")), wantOpen: messages.ErrUnavailable},
		{name: "error frame too short", script: cat(appendPreamble(nil), appendFrameHeader(nil, frameError, 1), []byte{2}), wantOpen: messages.ErrUnavailable},
		{name: "error frame too long", script: cat(appendPreamble(nil), appendFrameHeader(nil, frameError, 1<<30)), wantOpen: messages.ErrUnavailable},
		{name: "error frame", script: cat(appendPreamble(nil), errFrame(uint16(messages.ErrorCode_NOT_FOUND), "gone \xff\xfe")), wantOpen: messages.ErrNotFound, msg: "gone \uFFFD"},
		{name: "keepalives then error", script: cat(appendPreamble(nil), appendFrameHeader(nil, frameKeepalive, 0), appendFrameHeader(nil, frameKeepalive, 0), errFrame(uint16(messages.ErrorCode_DELETED), "")), wantOpen: messages.ErrDeleted},
		{name: "oversize data frame", script: cat(respond(100), appendFrameHeader(nil, frameData, 65), data[:65]), wantNext: messages.ErrUnavailable},
		{name: "huge data frame", script: cat(respond(100), appendFrameHeader(nil, frameData, 1<<32-1)), wantNext: messages.ErrUnavailable},
		{name: "data past the size", script: cat(respond(100), dataFrame(data[:64]), dataFrame(data[:64])), wantNext: messages.ErrUnavailable, valid: 64},
		{name: "empty data frame", script: cat(respond(100), dataFrame(nil)), wantNext: messages.ErrUnavailable},
		{name: "second size frame", script: cat(respond(100), respond(100)[6:]), wantNext: messages.ErrUnavailable},
		{name: "truncated data frame", script: cat(respond(100), appendFrameHeader(nil, frameData, 10), data[:5]), wantNext: messages.ErrUnavailable},
		{name: "truncated frame header", script: cat(respond(100), dataFrame(data[:20]), []byte{frameData, 0}), wantNext: messages.ErrUnavailable, valid: 20},
		{name: "close mid-stream", script: cat(respond(100), dataFrame(data[:30])), wantNext: messages.ErrUnavailable, valid: 30},
		{name: "reset mid-stream", script: cat(respond(100), dataFrame(data[:30])), then: 1, wantNext: messages.ErrUnavailable, valid: 30},
		{name: "error mid-stream", script: cat(respond(100), dataFrame(data[:30]), errFrame(uint16(messages.ErrorCode_RESET), "rewound")), then: 2, wantNext: &messages.Error{Code: messages.ErrorCode_RESET}, valid: 30, msg: "rewound"},
		{name: "stall", script: cat(respond(100), dataFrame(data[:30])), then: 2, wantNext: messages.ErrTimeout, valid: 30, msg: "sent nothing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			noLeaks(t)
			ctx := guardCtx(t)
			peerSawClose := make(chan struct{})
			addr := fakePeer(t, func(conn net.Conn, req tcpRequest) {
				if req.id != "o" || req.offset != c.offset || req.chunk != 64 {
					t.Errorf("request %+v", req)
				}
				conn.Write(c.script)
				switch c.then {
				case 1:
					conn.(*net.TCPConn).SetLinger(0)
				case 2:
					readUntilEOF(conn)
					close(peerSawClose)
				}
			})
			var log logSink
			cli := newTCP(t, TCPConfig{StallTimeout: 200 * time.Millisecond, Log: log.logf})
			s, err := cli.Open(ctx, "", addr, "o", c.offset, 64)
			if c.wantOpen != nil {
				if err == nil {
					s.Close()
				}
				wantCode(t, err, c.wantOpen)
				if !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("error %q does not say %q", err, c.msg)
				}
				var e *messages.Error
				if !errors.As(err, &e) || !utf8.ValidString(e.GetMessage()) {
					t.Fatalf("error %q: not a valid typed error", err)
				}
				if n := cli.activeConns(); n != 0 {
					t.Fatalf("%d connections active after a failed Open", n)
				}
				if errors.Is(err, messages.ErrUnavailable) {
					if n := cli.poolSize(addr); n != 0 {
						t.Fatal("a broken connection was pooled")
					}
					if !log.has("broke the protocol") && !log.has("closed") && c.msg != "" {
						t.Fatalf("violation not logged: %q", log.lines)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if s.Size() != 100 {
				t.Fatalf("Size() = %d", s.Size())
			}
			var got []byte
			for {
				b, err := s.Next(ctx)
				if err == nil {
					if len(b) == 0 || len(b) > 64 {
						t.Fatalf("chunk of %d bytes", len(b))
					}
					got = append(got, b...)
					continue
				}
				wantCode(t, err, c.wantNext)
				if !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("error %q does not say %q", err, c.msg)
				}
				// Final: the same error again.
				if _, err2 := s.Next(ctx); !errors.Is(err2, c.wantNext) {
					t.Fatalf("Next after the failure = %v", err2)
				}
				break
			}
			if !bytes.Equal(got, data[:c.valid]) {
				t.Fatalf("delivered %v, want the %d valid bytes", got, c.valid)
			}
			if c.then == 2 {
				if errors.Is(c.wantNext, messages.ErrTimeout) {
					// The receiver dropped the stalled connection itself.
					select {
					case <-peerSawClose:
					case <-time.After(hangGuard):
						t.Fatal("the stalled connection was not dropped")
					}
				}
			}
			if c.then == 2 && !errors.Is(c.wantNext, messages.ErrTimeout) {
				// An error frame ends the stream cleanly: the connection is reusable.
				if n := cli.poolSize(addr); n != 1 {
					t.Fatalf("pool holds %d after an error frame", n)
				}
			} else if n := cli.poolSize(addr); n != 0 {
				t.Fatal("a broken connection was pooled")
			}
		})
	}
}

// TestTCPBytesPastTheEnd: a peer that sends more than the stream holds
// gets the stream delivered but its connection is not reused.
func TestTCPBytesPastTheEnd(t *testing.T) {
	noLeaks(t)
	data := pattern(100)
	addr := fakePeer(t, func(c net.Conn, req tcpRequest) {
		c.Write(cat(respond(100), dataFrame(data), []byte("trailing garbage")))
		readUntilEOF(c)
	})
	var log logSink
	cli := newTCP(t, TCPConfig{Log: log.logf})
	ctx := guardCtx(t)
	s, err := cli.Open(ctx, "", addr, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := drain(t, ctx, s, 100); !bytes.Equal(got, data) {
		t.Fatal("other bytes")
	}
	if n := cli.poolSize(addr); n != 0 || !log.has("past the stream's end") {
		t.Fatalf("pool holds %d; log %q", n, log.lines)
	}
}

// TestTCPRandomGarbageServer feeds the client random frames after a valid
// header: whatever happens, errors are typed and chunks well formed.
func TestTCPRandomGarbageServer(t *testing.T) {
	noLeaks(t)
	rng := rand.New(rand.NewSource(1))
	var mu sync.Mutex
	var script []byte
	addr := fakePeer(t, func(c net.Conn, req tcpRequest) {
		mu.Lock()
		s := script
		mu.Unlock()
		c.Write(s)
	})
	cli := newTCP(t, TCPConfig{StallTimeout: time.Second})
	ctx := guardCtx(t)
	for i := range 300 {
		var b []byte
		if i%2 == 0 {
			b = respond(100)
		}
		for range rng.Intn(6) {
			switch rng.Intn(4) {
			case 0: // random bytes
				r := make([]byte, rng.Intn(20))
				rng.Read(r)
				b = append(b, r...)
			case 1: // a frame header with a random kind and length
				b = appendFrameHeader(b, "KSDEZ"[rng.Intn(5)], rng.Intn(200))
			default: // a plausible data frame
				r := make([]byte, 1+rng.Intn(80))
				rng.Read(r)
				b = append(b, dataFrame(r)...)
			}
		}
		mu.Lock()
		script = b
		mu.Unlock()
		s, err := cli.Open(ctx, "", addr, "o", 0, 64)
		if err != nil {
			var e *messages.Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			continue
		}
		n := 0
		for {
			c, err := s.Next(ctx)
			if err == io.EOF {
				if n != 100 {
					t.Fatalf("EOF after %d of 100 bytes", n)
				}
				break
			}
			if err != nil {
				var e *messages.Error
				if !errors.As(err, &e) {
					t.Fatalf("untyped error %v", err)
				}
				break
			}
			if len(c) == 0 || len(c) > 64 {
				t.Fatalf("chunk of %d bytes", len(c))
			}
			n += len(c)
		}
		s.Close()
	}
}

// rawResponse reads a server's answer to a hand-written request: the
// preamble and the frames until EOF or the deadline.
type rawFrame struct {
	kind byte
	p    []byte
}

func readRaw(t *testing.T, c net.Conn, frames int) (pre []byte, out []rawFrame, eof bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(hangGuard))
	pre = make([]byte, preambleLen)
	if _, err := io.ReadFull(c, pre); err != nil {
		return nil, nil, true
	}
	for frames < 0 || len(out) < frames {
		var h [frameHeaderLen]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return pre, out, true
		}
		p := make([]byte, binary.BigEndian.Uint32(h[1:]))
		if _, err := io.ReadFull(c, p); err != nil {
			t.Fatalf("truncated frame from the server: %v", err)
		}
		out = append(out, rawFrame{h[0], p})
	}
	return pre, out, false
}

func rawRequest(version uint16, idLen int, id string, offset int64, chunk uint32) []byte {
	b := append([]byte(nil), reqMagic[:]...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.BigEndian.AppendUint16(b, uint16(idLen))
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = binary.BigEndian.AppendUint32(b, chunk)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint64(b, 0)
	return append(b, id...)
}

func TestTCPMaliciousClient(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(100)
	src.add("o", complete(data))
	var log logSink
	srv, cli, addr := tcpPair(t, src, TCPConfig{StallTimeout: 200 * time.Millisecond, Log: log.logf}, TCPConfig{})
	dial := func() net.Conn {
		c, err := net.DialTimeout("tcp", HostPort(addr), hangGuard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	// A healthy stream stays open throughout.
	good, err := cli.Open(ctx, "", addr, "o", 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	defer good.Close()
	if _, err := good.Next(ctx); err != nil {
		t.Fatal(err)
	}

	wantError := func(name string, c net.Conn, code messages.ErrorCode, sub string) {
		t.Helper()
		pre, frames, _ := readRaw(t, c, 1)
		if !bytes.Equal(pre, appendPreamble(nil)) || len(frames) != 1 || frames[0].kind != frameError {
			t.Fatalf("%s: answer %q %v", name, pre, frames)
		}
		err, ok := decodeError(frames[0].p, addr)
		if !ok || !errors.Is(err, &messages.Error{Code: code}) || !strings.Contains(err.Error(), sub) {
			t.Fatalf("%s: error %v, want %v containing %q", name, err, code, sub)
		}
	}
	wantClosed := func(name string, c net.Conn) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(hangGuard))
		n, err := io.Copy(io.Discard, c)
		if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("%s: server did not close the connection: %v", name, err)
		}
		if n != 0 {
			t.Fatalf("%s: %d more bytes", name, n)
		}
	}

	// Garbage: dropped without an answer.
	c := dial()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	wantClosed("garbage", c)
	// Wrong version: told which, then dropped.
	c = dial()
	c.Write(rawRequest(9, 1, "o", 0, 10))
	wantError("version", c, messages.ErrorCode_INVALID_ARGUMENT, "version 9")
	wantClosed("version", c)
	// An id longer than the cap.
	c = dial()
	c.Write(rawRequest(tcpVersion, reqIDLenMask, strings.Repeat("x", reqIDLenMask), 0, 10))
	wantError("long id", c, messages.ErrorCode_INVALID_ARGUMENT, "exceeds")
	wantClosed("long id", c)
	// A flag this version does not know.
	c = dial()
	c.Write(rawRequest(tcpVersion, 1<<14|1, "o", 0, 10))
	wantError("unknown flag", c, messages.ErrorCode_INVALID_ARGUMENT, "unknown flags")
	wantClosed("unknown flag", c)

	// A truncated request, then silence: dropped after StallTimeout.
	c = dial()
	c.Write(rawRequest(tcpVersion, 1, "o", 0, 10)[:10])
	wantClosed("truncated", c)
	// A bad chunk size or offset is answered and the connection stays.
	c = dial()
	c.Write(rawRequest(tcpVersion, 1, "o", 0, 0))
	wantError("chunk 0", c, messages.ErrorCode_INVALID_ARGUMENT, "chunk size 0")
	c.Write(rawRequest(tcpVersion, 1, "o", 0, maxChunk+1))
	wantError("chunk too big", c, messages.ErrorCode_INVALID_ARGUMENT, "chunk size")
	c.Write(rawRequest(tcpVersion, 1, "o", -7, 10))
	wantError("negative offset", c, messages.ErrorCode_INVALID_ARGUMENT, "offset -7")
	c.Write(rawRequest(tcpVersion, 1, "o", 40, 50))
	pre, frames, _ := readRaw(t, c, 3)
	if !bytes.Equal(pre, appendPreamble(nil)) || len(frames) != 3 || frames[0].kind != frameSize ||
		binary.BigEndian.Uint64(frames[0].p) != 100 || !bytes.Equal(cat(frames[1].p, frames[2].p), data[40:]) ||
		len(frames[1].p) != 50 {
		t.Fatalf("stream after errors: %q %v", pre, frames)
	}

	// Random requests, some with a valid magic and version: each gets an
	// answer or a closed connection, never a crash.
	rng := rand.New(rand.NewSource(2))
	for i := range 60 {
		var req []byte
		switch i % 3 {
		case 0:
			req = make([]byte, 1+rng.Intn(64))
			rng.Read(req)
		default:
			req = rawRequest(tcpVersion, rng.Intn(40), "", rng.Int63n(300)-100, uint32(rng.Intn(200)))
			tail := make([]byte, rng.Intn(48))
			rng.Read(tail)
			req = append(req, tail...)
		}
		rc := dial()
		rc.Write(req)
		if tc, ok := rc.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		rc.SetReadDeadline(time.Now().Add(hangGuard))
		if _, err := io.Copy(io.Discard, rc); err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("random request %d: %v", i, err)
		}
		rc.Close()
	}

	// The server kept serving: the healthy stream completes, new ones work.
	rest := drain(t, ctx, good, 10)
	if !bytes.Equal(rest, data[10:]) {
		t.Fatal("healthy stream got other bytes")
	}
	s, err := cli.Open(ctx, "", addr, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := drain(t, ctx, s, 100); !bytes.Equal(got, data) {
		t.Fatal("new stream got other bytes")
	}
	s.Close()
	for _, want := range []string{"not a data request", "version 9", "exceeds", "truncated request"} {
		if !log.has(want) {
			t.Fatalf("server did not log %q: %q", want, log.lines)
		}
	}
	c.Close()
	// Only the client transport's pooled connection is left.
	eventually(t, "raw connections released", func() bool { return srv.server(addr).connCount() == 1 })
}

func TestTCPCloseStopsEverything(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	o := newFakeObject(100)
	o.append(pattern(10))
	src.add("o", o)
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})

	// Closing a stream ends a Next blocked in it.
	s, err := cli.Open(ctx, "", addr, "o", 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Next(ctx)
		done <- err
	}()
	s.Close()
	select {
	case err := <-done:
		wantCode(t, err, messages.ErrCanceled)
	case <-time.After(hangGuard):
		t.Fatal("Close did not end Next")
	}

	// Closing the receiving transport fails its streams.
	s, err = cli.Open(ctx, "", addr, "o", 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cli.Close()
	_, err = s.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	_, err = cli.Open(ctx, "", addr, "o", 0, 64)
	wantCode(t, err, messages.ErrUnavailable)

	// Closing the serving transport fails streams from it.
	cli2 := newTCP(t, TCPConfig{})
	s2, err := cli2.Open(ctx, "", addr, "o", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if b, err := s2.Next(ctx); err != nil || len(b) != 10 {
		t.Fatalf("Next = %d, %v", len(b), err)
	}
	srv.Close()
	_, err = s2.Next(ctx)
	wantCode(t, err, messages.ErrUnavailable)
	eventually(t, "readers closed", func() bool { return src.openReaders() == 0 })
}

func TestTCPFrameCodec(t *testing.T) {
	req := encodeRequest("obj", 1<<40+3, 12345, 1500*time.Millisecond, true, 0xfeed)
	if len(req) != reqHeaderLen+3 || !bytes.Equal(req[:4], reqMagic[:]) {
		t.Fatalf("request %x", req)
	}
	var h [reqHeaderLen]byte
	copy(h[:], req)
	got := parseRequestHeader(&h)
	want := tcpRequest{version: tcpVersion, idLen: 3, offset: 1<<40 + 3, chunk: 12345, keepalive: 1500 * time.Millisecond, paced: true, inc: 0xfeed}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed %+v, want %+v", got, want)
	}
	copy(h[:], encodeRequest("obj", 0, 1, 0, false, 0))
	if got := parseRequestHeader(&h); got.paced || got.idLen != 3 || got.badFlags {
		t.Fatalf("unpaced request parsed as %+v", got)
	}
	binary.BigEndian.PutUint16(h[6:], 1<<13|3) // a flag this version does not know
	if got := parseRequestHeader(&h); !got.badFlags {
		t.Fatalf("unknown flag not reported: %+v", got)
	}
	long := messages.Errorf(messages.ErrorCode_CONFLICT, "%s", strings.Repeat("é", maxErrMsg))
	p := errorPayload(long)
	if len(p) != 2+maxErrMsg {
		t.Fatalf("error payload of %d bytes", len(p))
	}
	err, ok := decodeError(p, "peer")
	if !ok || !errors.Is(err, messages.ErrConflict) || !utf8.ValidString(err.(*messages.Error).GetMessage()) {
		t.Fatalf("decoded %v, %v", err, ok)
	}
	// Context errors keep their meaning across the wire.
	err, ok = decodeError(errorPayload(context.DeadlineExceeded), "peer")
	if !ok || !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("decoded %v", err)
	}
	err, ok = decodeError(errorPayload(errors.New("boom")), "peer")
	if !ok || !errors.Is(err, messages.ErrInternal) {
		t.Fatalf("decoded %v", err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 0}, {0, 200}, {255, 255, 'x'}} {
		if _, ok := decodeError(bad, "peer"); ok {
			t.Fatalf("decoded %v", bad)
		}
	}
}

// ---------------------------------------------------------------- benchmarks

var benchData struct {
	once sync.Once
	b    []byte
}

func benchBytes(b *testing.B) []byte {
	size := 1 << 30
	if testing.Short() {
		size = 256 << 20
	}
	benchData.once.Do(func() { benchData.b = bigPattern(1 << 30) })
	return benchData.b[:size]
}

// tcpStreamOnce streams the object "o" once, touching every chunk as a
// receiver would (without copying it elsewhere).
func tcpStreamOnce(b *testing.B, ctx context.Context, cli *TCP, addr string, size, chunk int) {
	s, err := cli.Open(ctx, "", addr, "o", 0, chunk)
	if err != nil {
		b.Fatal(err)
	}
	n := 0
	for {
		c, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		n += len(c)
	}
	s.Close()
	if n != size {
		b.Fatalf("streamed %d of %d bytes", n, size)
	}
}

// plainPeer serves size bytes on every connection in writes of chunk
// bytes: the baseline, a plain Go TCP copy.
func plainPeer(b *testing.B, data []byte, chunk int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			for off := 0; off < len(data); off += chunk {
				if _, err := c.Write(data[off:min(len(data), off+chunk)]); err != nil {
					break
				}
			}
			c.Close()
		}
	}()
	b.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String()
}

func plainCopyOnce(b *testing.B, addr string, buf []byte, size int) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	n := 0
	for {
		m, err := c.Read(buf)
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if n != size {
		b.Fatalf("copied %d of %d bytes", n, size)
	}
}

func benchTCPSetup(b *testing.B, data []byte) (*TCP, string) {
	src := newFakeSource()
	// The object shares the bytes (no 1 GiB copy): the same source
	// memory as the plain copy.
	src.add("o", &fakeObject{buf: data, written: len(data), changed: make(chan struct{})})
	srv := NewTCP(TCPConfig{})
	cli := NewTCP(TCPConfig{})
	b.Cleanup(srv.Close)
	b.Cleanup(cli.Close)
	addr, err := srv.Serve("a", src)
	if err != nil {
		b.Fatal(err)
	}
	return cli, addr
}

var benchChunks = []int{1 << 20, 4 << 20}

// BenchmarkTCPStream1GiB streams one 1 GiB object (256 MiB with -short)
// over loopback.
func BenchmarkTCPStream1GiB(b *testing.B) {
	data := benchBytes(b)
	for _, chunk := range benchChunks {
		b.Run(fmt.Sprintf("chunk=%dMiB", chunk>>20), func(b *testing.B) {
			cli, addr := benchTCPSetup(b, data)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				tcpStreamOnce(b, b.Context(), cli, addr, len(data), chunk)
			}
		})
	}
}

// BenchmarkPlainTCPCopy copies the same bytes over a plain net.Conn in
// writes and reads of the same chunk size.
func BenchmarkPlainTCPCopy(b *testing.B) {
	data := benchBytes(b)
	for _, chunk := range benchChunks {
		b.Run(fmt.Sprintf("chunk=%dMiB", chunk>>20), func(b *testing.B) {
			addr := plainPeer(b, data, chunk)
			buf := make([]byte, chunk)
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				plainCopyOnce(b, addr, buf, len(data))
			}
		})
	}
}

// BenchmarkTCPvsPlain runs both, interleaved in each iteration, and
// reports the throughput ratio tcp/plain.
func BenchmarkTCPvsPlain(b *testing.B) {
	data := benchBytes(b)
	for _, chunk := range benchChunks {
		b.Run(fmt.Sprintf("chunk=%dMiB", chunk>>20), func(b *testing.B) {
			cli, addr := benchTCPSetup(b, data)
			paddr := plainPeer(b, data, chunk)
			buf := make([]byte, chunk)
			var tcpTime, plainTime time.Duration
			tcpBest, plainBest := time.Duration(1<<63-1), time.Duration(1<<63-1)
			b.SetBytes(2 * int64(len(data)))
			tcp := func() {
				start := time.Now()
				tcpStreamOnce(b, b.Context(), cli, addr, len(data), chunk)
				d := time.Since(start)
				tcpTime += d
				tcpBest = min(tcpBest, d)
			}
			plain := func() {
				start := time.Now()
				plainCopyOnce(b, paddr, buf, len(data))
				d := time.Since(start)
				plainTime += d
				plainBest = min(plainBest, d)
			}
			i := 0
			for b.Loop() {
				// Alternate which goes first, against order effects.
				if i%2 == 0 {
					tcp()
					plain()
				} else {
					plain()
					tcp()
				}
				i++
			}
			b.ReportMetric(plainTime.Seconds()/tcpTime.Seconds(), "tcp/plain")
			// The best iterations are the least disturbed by other load.
			b.ReportMetric(plainBest.Seconds()/tcpBest.Seconds(), "best-tcp/plain")
			b.ReportMetric(float64(b.N)*float64(len(data))/tcpTime.Seconds()/1e9, "tcp-GB/s")
			b.ReportMetric(float64(b.N)*float64(len(data))/plainTime.Seconds()/1e9, "plain-GB/s")
		})
	}
}

// On TCP, NextInto reads every payload byte from the socket straight
// into the caller's memory: no chunk went through the stream's own
// buffer nor the connection's (the contract's NextInto checks the bytes).
func TestTCPNextIntoFillsTheCallersBuffer(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(1000)
	src.add("o", complete(data))
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	for _, tc := range []struct {
		off   int64
		chunk int
	}{{0, 64}, {0, 1000}, {300, 128}, {999, 10}, {37, 100}, {0, 1}} {
		s, err := cli.Open(ctx, "b", addr, "o", tc.off, tc.chunk)
		if err != nil {
			t.Fatal(err)
		}
		is := s
		buf := make([]byte, 1000-tc.off)
		at := 0
		for {
			n, err := is.NextInto(ctx, buf[at:])
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
		}
		if at != len(buf) || !bytes.Equal(buf, data[tc.off:]) {
			t.Fatalf("off %d chunk %d: %d bytes, not data[%d:]", tc.off, tc.chunk, at, tc.off)
		}
		if ts := s.(*tcpStream); ts.buf != nil {
			t.Fatalf("off %d chunk %d: the stream allocated its own %d-byte buffer", tc.off, tc.chunk, len(ts.buf))
		}
		s.Close()
		// Nor through the connection's: every payload byte went from the
		// socket to buf in the kernel's one copy.
		if n := cli.relayedPayload(addr); n != 0 {
			t.Fatalf("off %d chunk %d: %d payload bytes copied through the connection's reader", tc.off, tc.chunk, n)
		}
	}
}

// A NextInto that times out mid-chunk resumes when called again with the
// same buffer; Next cannot resume it (the bytes are in the caller's
// memory) and fails the stream instead of returning a torn chunk.
func TestTCPNextIntoTimeoutMidFrame(t *testing.T) {
	for _, resumeWithNext := range []bool{false, true} {
		t.Run(fmt.Sprintf("resume with Next %v", resumeWithNext), func(t *testing.T) {
			noLeaks(t)
			data := pattern(1000)
			release := make(chan struct{})
			addr := fakePeer(t, func(c net.Conn, req tcpRequest) {
				w := respond(1000)
				w = appendFrameHeader(w, frameData, 1000)
				c.Write(append(w, data[:400]...))
				<-release
				c.Write(data[400:])
				readUntilEOF(c)
			})
			cli := newTCP(t, TCPConfig{})
			s, err := cli.Open(guardCtx(t), "", addr, "o", 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			is := s
			buf := make([]byte, 1000)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
			defer cancel()
			_, err = is.NextInto(ctx, buf)
			wantCode(t, err, messages.ErrTimeout)
			close(release)
			if resumeWithNext {
				if _, err := s.Next(guardCtx(t)); !errors.Is(err, messages.ErrInternal) {
					t.Fatalf("Next resuming a NextInto chunk = %v, want INTERNAL", err)
				}
				return
			}
			n, err := is.NextInto(guardCtx(t), buf)
			if err != nil || n != 1000 || !bytes.Equal(buf, data) {
				t.Fatalf("NextInto after a mid-frame timeout = %d bytes, %v", n, err)
			}
			if _, err := is.NextInto(guardCtx(t), buf); err != io.EOF {
				t.Fatalf("NextInto at the end = %v", err)
			}
		})
	}
}

// A connection that carried a stream of large chunks (read with the
// socket's SO_RCVLOWAT raised for them) serves a small control answer and
// a stream of a few bytes next: nothing waits for bytes that will not
// come, each well within its deadline.
func TestTCPSmallAnswersAfterLargeChunks(t *testing.T) {
	noLeaks(t)
	src := newCtlSource()
	big := bigPattern(1 << 20)
	src.add("big", complete(big))
	src.add("tiny", complete([]byte("hop")))
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{MaxConnsPerPeer: 1})
	for round := range 3 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s, err := cli.Open(ctx, "b", addr, "big", 0, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(big))
		for at := 0; at < len(got); {
			n, err := s.NextInto(ctx, got[at:])
			if err != nil {
				t.Fatalf("round %d at %d: %v", round, at, err)
			}
			at += n
		}
		s.Close()
		if !bytes.Equal(got, big) {
			t.Fatalf("round %d: other bytes", round)
		}
		reply, err := cli.Call(ctx, addr, 'e', []byte("ping"))
		if err != nil || string(reply) != "eping" {
			t.Fatalf("round %d: a control call after the stream = %q, %v", round, reply, err)
		}
		s, err = cli.Open(ctx, "b", addr, "tiny", 0, 256<<10)
		if err != nil {
			t.Fatal(err)
		}
		if got := drain(t, ctx, s, 256<<10); string(got) != "hop" {
			t.Fatalf("round %d: tiny stream = %q", round, got)
		}
		s.Close()
		cancel()
	}
	if d := cli.dials.Load(); d != 1 {
		t.Fatalf("%d dials: the streams and calls did not share the connection", d)
	}
}

// A sender with the default floor refuses a reader's one-byte chunks
// (they would cost it a read, a frame and a write a byte), and a client
// with it asks no less than the floor: an object of 10 KiB comes in three
// frames of at most DefaultMinChunk, not in 10,240.
func TestTCPMinChunk(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(10 << 10)
	src.add("o", complete(data))
	srv := NewTCP(TCPConfig{})
	t.Cleanup(srv.Close)
	addr, err := srv.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", HostPort(addr), hangGuard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(hangGuard))
	c.Write(rawRequest(tcpVersion, 1, "o", 0, 1))
	_, frames, _ := readRaw(t, c, 1)
	if len(frames) != 1 || frames[0].kind != frameError {
		t.Fatalf("a one-byte chunk was answered %v, want an error frame", frames)
	}
	if err, _ := decodeError(frames[0].p, addr); !errors.Is(err, &messages.Error{Code: messages.ErrorCode_INVALID_ARGUMENT}) ||
		!strings.Contains(err.Error(), fmt.Sprintf("outside %d..", DefaultMinChunk)) {
		t.Fatalf("a one-byte chunk: %v, want INVALID_ARGUMENT naming the floor", err)
	}
	// The connection stays: a request at the floor is served.
	c.Write(rawRequest(tcpVersion, 1, "o", 0, DefaultMinChunk))
	_, frames, _ = readRaw(t, c, 4)
	if len(frames) != 4 || frames[0].kind != frameSize || len(frames[1].p) != DefaultMinChunk ||
		!bytes.Equal(cat(frames[1].p, frames[2].p, frames[3].p), data) {
		t.Fatalf("a request at the floor: %d frames", len(frames))
	}

	cli := NewTCP(TCPConfig{})
	t.Cleanup(cli.Close)
	s, err := cli.Open(ctx, "", addr, "o", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
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
		got = append(got, b...)
		n++
	}
	if !bytes.Equal(got, data) || n != 3 {
		t.Fatalf("a client asking 1-byte chunks read %d bytes in %d chunks, want %d in 3", len(got), n, len(data))
	}
}
