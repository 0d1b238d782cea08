package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// ctlSource is a fakeSource that answers control requests: kind 'e'
// echoes the request behind its kind, 'n' fails NOT_FOUND, 'w' waits for
// its ctx and reports how it ended on ended, 'd' answers with the time
// left before its deadline, 'b' answers with a reply of the size the
// request names.
type ctlSource struct {
	*fakeSource
	ended chan error
	calls atomic.Int64
}

func newCtlSource() *ctlSource {
	return &ctlSource{fakeSource: newFakeSource(), ended: make(chan error, 8)}
}

func (s *ctlSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	s.calls.Add(1)
	switch kind {
	case 'e':
		return append([]byte{kind}, req...), nil
	case 'n':
		return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "no %s here", req)
	case 'w':
		<-ctx.Done()
		s.ended <- ctx.Err()
		return nil, messages.AsError(ctx.Err())
	case 'd':
		d, _ := ctx.Deadline()
		return binary.BigEndian.AppendUint64(nil, uint64(time.Until(d))), nil
	case 'b':
		return make([]byte, binary.BigEndian.Uint32(req)), nil
	}
	return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "kind %q", kind)
}

// callers are the two transports under one test: TCP between two
// instances, and Memory.
func callers(t *testing.T, src Source) map[string]struct {
	c    Caller
	addr string
	stop func()
} {
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	mem := NewMemory(0)
	maddr, err := mem.Serve("a", src)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]struct {
		c    Caller
		addr string
		stop func()
	}{
		"tcp":    {cli, addr, func() { srv.Unserve(addr) }},
		"memory": {mem, maddr, func() { mem.Unserve(maddr) }},
	}
}

func TestControlCall(t *testing.T) {
	noLeaks(t)
	for name, tr := range callers(t, newCtlSource()) {
		t.Run(name, func(t *testing.T) {
			ctx := guardCtx(t)
			for i := range 5 {
				req := bytes.Repeat([]byte{byte(i)}, 100*i)
				got, err := tr.c.Call(ctx, tr.addr, 'e', req)
				if err != nil || !bytes.Equal(got, append([]byte{'e'}, req...)) {
					t.Fatalf("call %d = %x, %v", i, got, err)
				}
			}
			// An error the handler returns arrives typed, with its text,
			// and the next call works.
			_, err := tr.c.Call(ctx, tr.addr, 'n', []byte("x7"))
			if !errors.Is(err, messages.ErrNotFound) || !strings.Contains(err.Error(), "no x7 here") || !Answered(err) {
				t.Fatalf("failing handler: %v (answered %v)", err, Answered(err))
			}
			// The handler's deadline is the caller's.
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			got, err := tr.c.Call(cctx, tr.addr, 'd', nil)
			if err != nil {
				t.Fatal(err)
			}
			if left := time.Duration(binary.BigEndian.Uint64(got)); left > 3*time.Second || left < time.Second {
				t.Fatalf("the handler had %v left of the caller's 3s", left)
			}
			// A reply as large as an inline object comes whole.
			got, err = tr.c.Call(ctx, tr.addr, 'b', binary.BigEndian.AppendUint32(nil, 1<<20))
			if err != nil || len(got) != 1<<20 {
				t.Fatalf("1 MiB reply: %d bytes, %v", len(got), err)
			}
			if _, err := tr.c.Call(context.Background(), tr.addr, 'e', nil); !errors.Is(err, messages.ErrInternal) {
				t.Fatalf("a call without a deadline = %v, want INTERNAL", err)
			}
			if _, err := tr.c.Call(ctx, tr.addr, 'e', make([]byte, MaxControlRequest+1)); !errors.Is(err, messages.ErrInvalidArgument) {
				t.Fatalf("an oversized request = %v, want INVALID_ARGUMENT", err)
			}
			if _, err := tr.c.Call(ctx, HostPort(tr.addr)+"9", 'e', nil); !errors.Is(err, messages.ErrUnavailable) || Answered(err) {
				t.Fatalf("a call to nobody = %v, want UNAVAILABLE, not an answer", err)
			}
		})
	}
}

// TestTCPControlSharesConnections: calls and streams reuse one pooled
// connection, one exchange after the other.
func TestTCPControlSharesConnections(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newCtlSource()
	data := pattern(10000)
	src.add("o", complete(data))
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	for i := range 4 {
		if _, err := cli.Call(ctx, addr, 'e', []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := cli.Call(ctx, addr, 'n', nil); !errors.Is(err, messages.ErrNotFound) {
			t.Fatal(err)
		}
		s, err := cli.Open(ctx, "b", addr, "o", 0, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if got := drain(t, ctx, s, 4096); !bytes.Equal(got, data) {
			t.Fatalf("stream after calls: %d bytes", len(got))
		}
	}
	if d := cli.dials.Load(); d != 1 {
		t.Fatalf("%d connections dialed for 8 calls and 4 streams, want 1", d)
	}
}

// TestTCPControlHangup: a caller that gives up while the handler waits
// (a Locate parked until a Put) ends the handler's wait at once, not at
// its deadline; a server that stops fails a waiting call UNAVAILABLE.
func TestTCPControlHangup(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newCtlSource()
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	cctx, cancel := context.WithTimeout(ctx, time.Hour)
	res := make(chan error, 1)
	go func() {
		_, err := cli.Call(cctx, addr, 'w', nil)
		res <- err
	}()
	eventually(t, "handler called", func() bool { return src.calls.Load() == 1 })
	time.Sleep(2 * hangupDelay) // past the delay: the watch is on
	cancel()
	if err := <-res; !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("a canceled call = %v, want CANCELED", err)
	}
	select {
	case err := <-src.ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the handler's ctx ended with %v, want canceled by the hangup", err)
		}
	case <-ctx.Done():
		t.Fatal("the handler still waits after its caller hung up")
	}
	// Hung up before the watch starts: noticed once it does.
	cctx, cancel = context.WithTimeout(ctx, time.Hour)
	go func() {
		_, err := cli.Call(cctx, addr, 'w', nil)
		res <- err
	}()
	eventually(t, "handler called", func() bool { return src.calls.Load() == 2 })
	cancel()
	<-res
	select {
	case <-src.ended:
	case <-ctx.Done():
		t.Fatal("the handler still waits after an early hangup")
	}
	// The server stops while a call waits.
	go func() {
		_, err := cli.Call(ctx, addr, 'w', nil)
		res <- err
	}()
	eventually(t, "handler called", func() bool { return src.calls.Load() == 3 })
	srv.Unserve(addr)
	if err := <-res; !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call whose server stopped = %v, want UNAVAILABLE", err)
	}
	<-src.ended
}

func TestMemoryControlPeerStops(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newCtlSource()
	mem := NewMemory(0)
	addr, _ := mem.Serve("a", src)
	res := make(chan error, 1)
	go func() {
		_, err := mem.Call(ctx, addr, 'w', nil)
		res <- err
	}()
	eventually(t, "handler called", func() bool { return src.calls.Load() == 1 })
	mem.Unserve(addr)
	if err := <-res; !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call whose peer stopped = %v, want UNAVAILABLE", err)
	}
	if err := <-src.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the handler's ctx ended with %v", err)
	}
	if _, err := NewMemory(0).Call(ctx, addr, 'e', nil); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call to an unserved address = %v", err)
	}
}

// TestTCPControlBadRequests: a source without a Controller, and control
// headers no conforming caller sends, are refused with an error frame.
func TestTCPControlBadRequests(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	plain := newFakeSource()
	_, cli, addr := tcpPair(t, plain, TCPConfig{}, TCPConfig{})
	if _, err := cli.Call(ctx, addr, 'e', nil); !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "no control requests") {
		t.Fatalf("a call to a source without a Controller = %v", err)
	}
	_, _, addr = tcpPair(t, newCtlSource(), TCPConfig{}, TCPConfig{})
	for name, mutate := range map[string]func([]byte){
		"oversized":  func(h []byte) { binary.BigEndian.PutUint32(h[8:], MaxControlRequest+1) },
		"no timeout": func(h []byte) { binary.BigEndian.PutUint32(h[12:], 0) },
		"version":    func(h []byte) { binary.BigEndian.PutUint16(h[4:], tcpVersion+1) },
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", HostPort(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			msg := encodeControl('e', []byte("hi"), time.Second, 0)
			mutate(msg)
			nc.SetDeadline(time.Now().Add(hangGuard))
			if _, err := nc.Write(msg); err != nil {
				t.Fatal(err)
			}
			answer, _ := io.ReadAll(nc)
			if len(answer) < preambleLen+frameHeaderLen || answer[preambleLen] != frameError {
				t.Fatalf("answer %q, want an error frame", answer)
			}
			e, ok := decodeError(answer[preambleLen+frameHeaderLen:], addr)
			if !ok || !errors.Is(e, messages.ErrInvalidArgument) {
				t.Fatalf("error frame %v", e)
			}
		})
	}
}

// TestTCPControlRequestInPieces: the server reads requests through a
// buffer; a control request whose bytes come in pieces, one longer than
// the buffer, and one right behind another's answer on the same
// connection are each answered exactly.
func TestTCPControlRequestInPieces(t *testing.T) {
	noLeaks(t)
	_, _, addr := tcpPair(t, newCtlSource(), TCPConfig{}, TCPConfig{})
	nc, err := net.Dial("tcp", HostPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(hangGuard))
	echoed := func(name string, req []byte) {
		t.Helper()
		_, frames, eof := readRaw(t, nc, 1)
		if eof || len(frames) != 1 || frames[0].kind != frameControl || !bytes.Equal(frames[0].p, append([]byte{'e'}, req...)) {
			t.Fatalf("%s: answer %v (eof %v)", name, frames, eof)
		}
	}
	req := bytes.Repeat([]byte("piece"), 600)
	msg := encodeControl('e', req, time.Second, 0)
	for _, cut := range [][]byte{msg[:1], msg[1:10], msg[10 : reqHeaderLen+5], msg[reqHeaderLen+5:]} {
		if _, err := nc.Write(cut); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	echoed("in pieces", req)
	long := bytes.Repeat([]byte("0123456789"), 3*requestBuffer/10)
	if _, err := nc.Write(encodeControl('e', long, time.Second, 0)); err != nil {
		t.Fatal(err)
	}
	echoed("longer than the buffer", long)
	for i := range 3 {
		short := []byte{'h', 'i', byte('0' + i)}
		if _, err := nc.Write(encodeControl('e', short, time.Second, 0)); err != nil {
			t.Fatal(err)
		}
		echoed("whole", short)
	}
}

// TestTCPControlTLS: control requests ride the mutual-TLS connections
// too, and a caller without the cluster's certificate gets no answer.
func TestTCPControlTLS(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	cluster := tlsConfig(t)
	var ref refusals
	src := newCtlSource()
	_, cli, addr := tcpPair(t, src, TCPConfig{TLS: cluster, Refused: ref.add}, TCPConfig{TLS: cluster})
	for range 3 {
		if got, err := cli.Call(ctx, addr, 'e', []byte("tls")); err != nil || string(got) != "etls" {
			t.Fatalf("call over TLS = %q, %v", got, err)
		}
	}
	foreign := newTCP(t, TCPConfig{TLS: tlsConfig(t)})
	if _, err := foreign.Call(ctx, addr, 'e', nil); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call with a foreign certificate = %v, want UNAVAILABLE", err)
	}
	plain := newTCP(t, TCPConfig{})
	if _, err := plain.Call(ctx, addr, 'e', nil); err == nil {
		t.Fatal("a plaintext call was answered by a TLS data port")
	}
	if n := src.calls.Load(); n != 3 {
		t.Fatalf("the handler ran %d times, want only the 3 calls of the cluster's member", n)
	}
}

// BenchmarkTCPControlCall is the round trip of a small control request
// on loopback: the data plane's floor under a Locate.
func BenchmarkTCPControlCall(b *testing.B) {
	src := newCtlSource()
	srv := NewTCP(TCPConfig{})
	defer srv.Close()
	cli := NewTCP(TCPConfig{})
	defer cli.Close()
	addr, err := srv.Serve("a", src)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req := make([]byte, 100)
	for b.Loop() {
		if _, err := cli.Call(ctx, addr, 'e', req); err != nil {
			b.Fatal(err)
		}
	}
}
