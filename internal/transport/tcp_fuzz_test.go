package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hoplite-go/hoplite/messages"
)

// The data plane's decoders, fuzzed through the code that runs them: the
// server reading requests from a connection, the client reading a
// stream's answer and a control call's. Every target checks that no
// input panics (a recovered panic counts too), that errors are typed,
// and that the side under test is still good for the next exchange.

// fuzzSource serves "o" (100 bytes) and "" (empty); "park" waits for its
// ctx; control kind 'w' waits for its ctx, any other kind is echoed.
type fuzzSource struct{ *fakeSource }

func newFuzzSource() *fuzzSource {
	s := &fuzzSource{newFakeSource()}
	s.add("o", complete(pattern(100)))
	s.add("", complete(nil))
	return s
}

func (s *fuzzSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	if id == "park" {
		<-ctx.Done()
		return nil, messages.AsError(ctx.Err())
	}
	return s.fakeSource.OpenObject(ctx, id)
}

func (s *fuzzSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	if kind == 'w' {
		<-ctx.Done()
		return nil, messages.AsError(ctx.Err())
	}
	return append([]byte{kind}, req...), nil
}

// typed says whether err is one of the transport's typed errors.
func typed(err error) bool {
	var e *messages.Error
	return errors.As(err, &e) && e.Code != messages.ErrorCode_OK
}

// inputConn is the server's end of a pipe; it reports when the server
// reads again after it has read all of the input: the server has taken
// everything it was given and wants more.
type inputConn struct {
	net.Conn
	n      int // input length
	read   atomic.Int64
	wants  chan struct{}
	once   sync.Once
	closed chan struct{}
	cOnce  sync.Once
}

func (c *inputConn) Read(p []byte) (int, error) {
	if c.read.Load() >= int64(c.n) {
		c.once.Do(func() { close(c.wants) })
	}
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c *inputConn) Close() error {
	c.cOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// serveInput runs in as the whole inbound byte stream of a connection
// that s serves, and returns what the server answered. It fails t if the
// server holds on to the connection once the input is all read and the
// client is gone.
func serveInput(t *testing.T, s *tcpServer, in []byte) []byte {
	client, server := net.Pipe()
	ic := &inputConn{Conn: server, n: len(in), wants: make(chan struct{}), closed: make(chan struct{})}
	var out bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		io.Copy(&out, client)
	}()
	go func() {
		client.SetWriteDeadline(time.Now().Add(hangGuard))
		client.Write(in)
	}()
	s.admit(ic)
	select {
	case <-ic.wants:
	case <-ic.closed:
	case <-time.After(hangGuard):
		t.Fatalf("the server neither read all of %q nor closed the connection", in)
	}
	client.Close()
	select {
	case <-ic.closed:
	case <-time.After(hangGuard):
		t.Fatalf("the server kept a connection its client closed (input %q)", in)
	}
	<-read
	return out.Bytes()
}

// checkIdle fails t unless s holds no connection and no budget.
func checkIdle(t *testing.T, tr *TCP, s *tcpServer) {
	deadline := time.Now().Add(hangGuard)
	for {
		s.mu.Lock()
		n, p, srcs := len(s.conns), s.pending, len(s.sources)
		s.mu.Unlock()
		if n == 0 && p == 0 && srcs == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the connection ended: %d connections, %d pending, %d sources held", n, p, srcs)
		}
		time.Sleep(time.Millisecond)
	}
	if n := tr.Stats().PanicsRecovered; n != 0 {
		t.Fatalf("%d panics while serving", n)
	}
}

// FuzzServeConn: any bytes from a peer, as a served connection's whole
// inbound stream, leave the server serving: no panic, the connection
// closed once the peer is gone and its slots given back, and the next
// connection's good request answered.
func FuzzServeConn(f *testing.F) {
	good := encodeRequest("o", 0, 64, 0, false, 0)
	ctl := encodeControl('e', []byte("hello"), time.Second, 0)
	f.Add(good)
	f.Add(cat(good, good))
	f.Add(ctl)
	f.Add(cat(ctl, good, ctl))
	f.Add(encodeRequest("o", 50, 7, 20*time.Millisecond, true, 0))
	f.Add(encodeRequest("", 0, 1, 0, false, 0))
	f.Add(encodeRequest("o", 101, 64, 0, false, 0))
	f.Add(encodeRequest("o", -1, 64, 0, false, 0))
	f.Add(encodeRequest("o", 0, 0, 0, false, 0))
	f.Add(encodeRequest("o", 0, maxChunk+1, 0, false, 0))
	f.Add(encodeRequest("missing", 0, 64, 0, false, 0))
	f.Add(encodeRequest("o", 0, 64, 0, false, 42))
	f.Add(encodeRequest("park", 0, 64, 10*time.Millisecond, false, 0))
	f.Add(encodeControl('w', nil, time.Hour, 0))
	f.Add(encodeControl('e', nil, 0, 7))
	f.Add(rawRequest(tcpVersion, 1<<15|1<<14|3, "o", 0, 64))
	f.Add(rawRequest(tcpVersion, maxIDLen+1, "", 0, 64))
	f.Add(rawRequest(tcpVersion-1, 1, "o", 0, 64))
	f.Add(rawRequest(tcpVersion, 10, "o", 0, 64))
	f.Add(good[:17])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	bad := bytes.Clone(ctl)
	binary.BigEndian.PutUint32(bad[8:], MaxControlRequest+1)
	f.Add(bad)
	bad = bytes.Clone(ctl)
	binary.BigEndian.PutUint32(bad[12:], 0)
	f.Add(bad)

	tr := NewTCP(TCPConfig{StallTimeout: time.Second, HandshakeTimeout: time.Second, RequestTimeout: time.Second, MinChunk: 1})
	f.Cleanup(tr.Close)
	addr, err := tr.Serve("a", newFuzzSource())
	if err != nil {
		f.Fatal(err)
	}
	s := tr.server(addr)
	var runs atomic.Int64
	f.Fuzz(func(t *testing.T, in []byte) {
		out := serveInput(t, s, in)
		if len(out) > 0 && !bytes.HasPrefix(out, appendPreamble(nil)[:min(len(out), preambleLen)]) {
			t.Fatalf("answer %q does not start with the preamble", out[:min(len(out), 16)])
		}
		checkIdle(t, tr, s)
		if runs.Add(1)%32 != 1 {
			return
		}
		out = serveInput(t, s, good)
		want := cat(respond(100), dataFrame(pattern(100)[:64]), dataFrame(pattern(100)[64:]))
		if !bytes.Equal(out, want) {
			t.Fatalf("a good request after %q was answered %q", in, out)
		}
		checkIdle(t, tr, s)
	})
}

// scriptPeer is a data peer that answers every request with the bytes
// its script holds at the time, then closes the connection.
type scriptPeer struct {
	ln      net.Listener
	script  atomic.Pointer[[]byte]
	orderly atomic.Int64
	wg      sync.WaitGroup
}

func newScriptPeer(f *testing.F) *scriptPeer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	p := &scriptPeer{ln: ln}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go p.serve(c)
		}
	}()
	f.Cleanup(func() {
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *scriptPeer) serve(c net.Conn) {
	defer p.wg.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(hangGuard))
	var h [reqHeaderLen]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return
	}
	n := int64(parseRequestHeader(&h).idLen)
	if [4]byte(h[:4]) == ctlMagic {
		n = int64(binary.BigEndian.Uint32(h[8:]))
	}
	if _, err := io.CopyN(io.Discard, c, n); err != nil {
		return
	}
	script := *p.script.Load()
	c.Write(script)
	// Mostly an abortive close (the client reads what came, then a
	// reset): an orderly one leaves this side in TIME_WAIT, and
	// thousands of those a second make the fuzzer's next dials collide
	// with them. Every eighth script, and any too long to be all in the
	// client's socket by now, ends orderly.
	if len(script) > 32<<10 || p.orderly.Add(1)%8 == 0 {
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
		return
	}
	c.(*net.TCPConn).SetLinger(0)
}

func (p *scriptPeer) addr() string { return p.ln.Addr().String() }

// FuzzOpenResponse: any bytes as a peer's answer to a stream request
// make Open and Next (or NextInto) return the object's bytes in order,
// up to its size, or a typed error; never a panic or a hang.
func FuzzOpenResponse(f *testing.F) {
	data := pattern(100)
	whole := cat(respond(100), dataFrame(data[:64]), dataFrame(data[64:]))
	f.Add(whole, uint16(63), uint8(0), uint8(0))
	f.Add(whole, uint16(63), uint8(0), uint8(1))
	f.Add(cat(respond(100), dataFrame(data[10:74]), dataFrame(data[74:])), uint16(63), uint8(10), uint8(1))
	f.Add(cat(appendPreamble(nil), appendFrameHeader(nil, frameKeepalive, 0), appendFrameHeader(nil, frameKeepalive, 0), errFrame(2, "no object")), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(100), dataFrame(data[:64]), appendFrameHeader(nil, frameKeepalive, 0), errFrame(7, "gone")), uint16(63), uint8(0), uint8(1))
	f.Add(cat(respond(0)), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(5), dataFrame(data[:5]), []byte("extra")), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(100), dataFrame(data[:65])), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(100), respond(100)), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(-1)), uint16(63), uint8(0), uint8(0))
	f.Add(cat(respond(3)), uint16(63), uint8(9), uint8(0))
	f.Add(cat(appendPreamble(nil), errFrame(0, "ok?")), uint16(63), uint8(0), uint8(0))
	f.Add(cat(appendPreamble(nil), errFrame(999, "what")), uint16(63), uint8(0), uint8(0))
	f.Add(cat(appendPreamble(nil), errFrame(2, "\xff\xfe")), uint16(63), uint8(0), uint8(0))
	f.Add(cat(appendPreamble(nil), appendFrameHeader(nil, frameError, 1<<30)), uint16(63), uint8(0), uint8(0))
	f.Add(cat(appendPreamble(nil), appendFrameHeader(nil, frameData, 10), data[:10]), uint16(63), uint8(0), uint8(0))
	f.Add([]byte("HPDR\x00\x01"), uint16(63), uint8(0), uint8(0))
	f.Add([]byte("HPDQ"), uint16(63), uint8(0), uint8(0))
	f.Add([]byte{}, uint16(63), uint8(0), uint8(0))

	peer := newScriptPeer(f)
	cli := NewTCP(TCPConfig{StallTimeout: hangGuard / 2, MinChunk: 1}) // small chunks: many frames of a small object
	f.Cleanup(cli.Close)
	addr := peer.addr()
	f.Fuzz(func(t *testing.T, script []byte, chunk16 uint16, off8 uint8, mode uint8) {
		peer.script.Store(&script)
		defer cli.ForgetPeer(addr)
		chunk, offset := int(chunk16)+1, int64(off8)
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		s, err := cli.Open(ctx, "", addr, "o", offset, chunk)
		if err != nil {
			if !typed(err) {
				t.Fatalf("Open = %v (%T), not a typed error", err, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("Open = %v: waited out its deadline, though the peer closed the connection", err)
			}
			return
		}
		defer s.Close()
		size := s.Size()
		if size < offset {
			t.Fatalf("size %d below the offset %d", size, offset)
		}
		var got int64
		for i := 0; ; i++ {
			var p []byte
			var err error
			if mode>>(i%8)&1 == 1 {
				buf := make([]byte, min(int64(chunk), size-offset-got))
				var n int
				n, err = s.NextInto(ctx, buf)
				p = buf[:n]
			} else {
				p, err = s.Next(ctx)
			}
			if err == io.EOF {
				if offset+got != size {
					t.Fatalf("EOF after %d bytes from %d of %d", got, offset, size)
				}
				return
			}
			if err != nil {
				if !typed(err) {
					t.Fatalf("Next = %v (%T), not a typed error", err, err)
				}
				if ctx.Err() != nil {
					t.Fatalf("Next = %v: waited out its deadline, though the peer closed the connection", err)
				}
				return
			}
			if len(p) == 0 || len(p) > chunk || offset+got+int64(len(p)) > size {
				t.Fatalf("a chunk of %d bytes at %d (chunk %d, size %d)", len(p), offset+got, chunk, size)
			}
			got += int64(len(p))
		}
	})
}

// FuzzCallReply: any bytes as a peer's answer to a control request make
// Call return a reply within MaxControlReply or a typed error (the
// peer's own, Answered, for a well-formed error frame).
func FuzzCallReply(f *testing.F) {
	ctlFrame := func(p []byte) []byte { return append(appendFrameHeader(nil, frameControl, len(p)), p...) }
	f.Add(cat(appendPreamble(nil), ctlFrame([]byte("reply"))))
	f.Add(cat(appendPreamble(nil), ctlFrame(nil)))
	f.Add(cat(appendPreamble(nil), ctlFrame(bytes.Repeat([]byte("x"), 5000))))
	f.Add(cat(appendPreamble(nil), errFrame(2, "not here")))
	f.Add(cat(appendPreamble(nil), errFrame(0, "")))
	f.Add(cat(appendPreamble(nil), errFrame(2, "")[:6]))
	f.Add(cat(appendPreamble(nil), appendFrameHeader(nil, frameControl, MaxControlReply+1)))
	f.Add(cat(appendPreamble(nil), appendFrameHeader(nil, frameKeepalive, 0), ctlFrame([]byte("r"))))
	f.Add(cat(appendPreamble(nil), ctlFrame([]byte("r")), []byte("past the end")))
	f.Add(cat(appendPreamble(nil), ctlFrame([]byte("reply"))[:8]))
	f.Add(respond(5))
	f.Add([]byte("HPDR\x00\x02"))
	f.Add([]byte{})

	peer := newScriptPeer(f)
	cli := NewTCP(TCPConfig{})
	f.Cleanup(cli.Close)
	addr := peer.addr()
	f.Fuzz(func(t *testing.T, script []byte) {
		peer.script.Store(&script)
		defer cli.ForgetPeer(addr)
		ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
		defer cancel()
		reply, err := cli.Call(ctx, addr, 'e', []byte("req"))
		if err != nil {
			if !typed(err) {
				t.Fatalf("Call = %v (%T), not a typed error", err, err)
			}
			if ctx.Err() != nil {
				t.Fatalf("Call = %v: waited out its deadline, though the peer closed the connection", err)
			}
			return
		}
		if len(reply) > MaxControlReply || len(script) < preambleLen+frameHeaderLen+len(reply) {
			t.Fatalf("a reply of %d bytes from a script of %d", len(reply), len(script))
		}
	})
}

// FuzzDecodeError: an error frame's payload decodes to a typed error of a
// known code other than OK, with a valid UTF-8 message, or is rejected;
// what errorPayload encodes decodes to its code.
func FuzzDecodeError(f *testing.F) {
	f.Add(errorPayload(messages.Errorf(messages.ErrorCode_NOT_FOUND, "no object")))
	f.Add(errorPayload(messages.Errorf(messages.ErrorCode_LOST, "%s", strings.Repeat("é", maxErrMsg))))
	f.Add([]byte{0, 0})
	f.Add([]byte{0})
	f.Add([]byte{0xff, 0xff, 'x'})
	f.Add([]byte{0, 7, 0xff, 0xc3})
	f.Fuzz(func(t *testing.T, p []byte) {
		err, ok := decodeError(p, "peer")
		if !ok {
			return
		}
		var e *messages.Error
		if !errors.As(err, &e) || e.Code == messages.ErrorCode_OK {
			t.Fatalf("decodeError(%q) = %v", p, err)
		}
		if _, known := messages.ErrorCode_name[int32(e.Code)]; !known {
			t.Fatalf("decodeError(%q): unknown code %d", p, e.Code)
		}
		if !utf8.ValidString(e.Message) {
			t.Fatalf("decodeError(%q): message %q is not UTF-8", p, e.Message)
		}
		back, ok := decodeError(errorPayload(err), "peer")
		if !ok || !errors.Is(back, &messages.Error{Code: e.Code}) {
			t.Fatalf("re-encoded %v decodes to %v, %v", err, back, ok)
		}
	})
}
