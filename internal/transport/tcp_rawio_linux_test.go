package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// rawTCPPair is a connected pair of loopback TCP connections.
func rawTCPPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

func rawOf(t *testing.T, c *net.TCPConn) syscall.RawConn {
	t.Helper()
	raw, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func TestConsume(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []string
	}{
		{0, []string{"ab", "cde", "f"}},
		{1, []string{"b", "cde", "f"}},
		{2, []string{"cde", "f"}},
		{4, []string{"e", "f"}},
		{6, nil},
	} {
		bufs := net.Buffers{[]byte("ab"), []byte("cde"), []byte("f")}
		consume(&bufs, c.n)
		var got []string
		for _, b := range bufs {
			got = append(got, string(b))
		}
		if len(got) != len(c.want) {
			t.Fatalf("consume %d: %q, want %q", c.n, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("consume %d: %q, want %q", c.n, got, c.want)
			}
		}
	}
}

// rawWrite writes every buffer whole, in order, through a socket whose
// buffers are far smaller than the bytes (it waits for room, EAGAIN,
// many times), and rawRead reads them back, then io.EOF at the end.
func TestRawWriteAndReadMoveEveryByte(t *testing.T) {
	c, s := rawTCPPair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = s.SetReadBuffer(16 << 10)
	parts := [][]byte{bytes.Repeat([]byte{1}, 7), bytes.Repeat([]byte{2}, 3<<20), {}, bytes.Repeat([]byte{3}, 1<<20+5)}
	var want []byte
	for _, p := range parts {
		want = append(want, p...)
	}
	got := make(chan []byte, 1)
	go func() {
		raw := rawOf(t, s)
		var all []byte
		buf := make([]byte, 64<<10)
		for {
			iov := [2][]byte{buf[:1000], buf[1000:]}
			n, err := rawRead(raw, iov[:])
			all = append(all, buf[:n]...)
			if err != nil {
				if err != io.EOF {
					t.Errorf("rawRead: %v", err)
				}
				got <- all
				return
			}
		}
	}()
	bufs := net.Buffers(parts)
	c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	n, err := rawWrite(rawOf(t, c), &bufs)
	if err != nil || n != int64(len(want)) || len(bufs) != 0 {
		t.Fatalf("rawWrite: %d bytes, %v, %d buffers left; want %d, nil, none", n, err, len(bufs), len(want))
	}
	c.CloseWrite()
	select {
	case all := <-got:
		if !bytes.Equal(all, want) {
			t.Fatalf("read %d bytes, not the %d written", len(all), len(want))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reader did not reach the end")
	}
}

// A peer that reads nothing: rawWrite stops at the write deadline with
// what it wrote (a timeout, which writeAll retries while bytes move),
// and rawRead stops at the read deadline.
func TestRawIOKeepsDeadlines(t *testing.T) {
	c, s := rawTCPPair(t)
	_ = c.SetWriteBuffer(16 << 10)
	_ = s.SetReadBuffer(16 << 10)
	bufs := net.Buffers{make([]byte, 8<<20)}
	c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := rawWrite(rawOf(t, c), &bufs)
	if !errors.Is(err, os.ErrDeadlineExceeded) || n == 0 || n >= 8<<20 {
		t.Fatalf("rawWrite to a peer that does not read: %d bytes, %v; want some bytes and the deadline", n, err)
	}
	if left := len(bufs[0]); int64(left) != 8<<20-n {
		t.Fatalf("%d bytes left in the buffer after writing %d of 8 MiB", left, n)
	}
	_, s2 := rawTCPPair(t)
	s2.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	iov := [1][]byte{make([]byte, 10)}
	if _, err := rawRead(rawOf(t, s2), iov[:]); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("rawRead with nothing sent: %v, want the deadline", err)
	}
}

// rcvLowat is the socket's SO_RCVLOWAT.
func rcvLowat(t *testing.T, c *net.TCPConn) int {
	t.Helper()
	var v int
	var gerr error
	if err := rawOf(t, c).Control(func(fd uintptr) {
		v, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVLOWAT)
	}); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return v
}

// A payload read on a plain socket asks the kernel to wake it for the
// payload's whole rest up to payloadLowat (a 256 KiB chunk: one wake-up),
// never for more than the rest (it would wait for bytes that are not
// coming); a header read from the socket asks for one byte. Every byte
// arrives.
func TestPayloadReadWaitsForItsRest(t *testing.T) {
	cli, srv := rawTCPPair(t)
	r := newConnReader(cli)
	if !r.plain {
		t.Fatal("a loopback TCP connection is not plain")
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), (payloadLowat+100<<10)/16)
	hdr := appendFrameHeader(nil, frameData, len(payload))
	go func() {
		srv.Write(hdr)
		srv.Write(payload)
		srv.Write(appendFrameHeader(nil, frameKeepalive, 0))
	}()
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(hdr))
	if _, err := r.ReadFull(got, false); err != nil || !bytes.Equal(got, hdr) {
		t.Fatalf("header %x, %v", got, err)
	}
	if lw := rcvLowat(t, cli); lw != 1 {
		t.Fatalf("SO_RCVLOWAT %d after a header read, want 1", lw)
	}
	body := make([]byte, len(payload))
	n, err := r.ReadPayload(body)
	if err != nil {
		t.Fatal(err)
	}
	if lw := rcvLowat(t, cli); lw != payloadLowat {
		t.Fatalf("SO_RCVLOWAT %d for a payload of %d bytes, want %d", lw, len(body), payloadLowat)
	}
	for n < len(body) {
		rest := len(body) - n
		m, err := r.ReadPayload(body[n:])
		if err != nil {
			t.Fatal(err)
		}
		if lw := rcvLowat(t, cli); lw > rest {
			t.Fatalf("SO_RCVLOWAT %d for the last %d bytes of a payload", lw, rest)
		}
		n += m
	}
	if !bytes.Equal(body, payload) {
		t.Fatal("other bytes")
	}
	got = make([]byte, frameHeaderLen)
	if _, err := r.ReadFull(got, false); err != nil || got[0] != frameKeepalive {
		t.Fatalf("next header %x, %v", got, err)
	}
}

// TestControlAnswerComesWithItsHeader: a control answer's body comes in
// the readv(2) that takes its header (ReadHead), SO_RCVLOWAT stays at one
// byte, and an answer longer than what is read ahead, a header that
// arrives in pieces, or one after a payload read that raised
// SO_RCVLOWAT, still comes whole and exact.
func TestControlAnswerComesWithItsHeader(t *testing.T) {
	cli, srv := rawTCPPair(t)
	r := newConnReader(cli)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer := func(body []byte) []byte {
		return append(appendFrameHeader(appendPreamble(nil), frameControl, len(body)), body...)
	}
	read := func(name string, want []byte) (aheadAfterHead int) {
		t.Helper()
		var head [preambleLen + frameHeaderLen]byte
		if _, err := r.ReadHead(head[:]); err != nil {
			t.Fatalf("%s: head: %v", name, err)
		}
		if !bytes.Equal(head[:4], respMagic[:]) || head[preambleLen] != frameControl {
			t.Fatalf("%s: head %x", name, head)
		}
		aheadAfterHead = r.Buffered()
		body := make([]byte, binary.BigEndian.Uint32(head[preambleLen+1:]))
		if _, err := r.ReadFull(body, false); err != nil || !bytes.Equal(body, want) {
			t.Fatalf("%s: body of %d bytes, %v; want %d", name, len(body), err, len(want))
		}
		if r.Buffered() != 0 {
			t.Fatalf("%s: %d bytes left read ahead after the answer", name, r.Buffered())
		}
		return aheadAfterHead
	}

	small := bytes.Repeat([]byte("locate "), 150) // a 1 KiB object inline
	srv.Write(answer(small))
	if got := read("small", small); got != len(small) {
		t.Fatalf("%d of a %d-byte body read with its header, want all of it", got, len(small))
	}
	if lw := rcvLowat(t, cli); lw > 1 {
		t.Fatalf("SO_RCVLOWAT %d after a control answer, want 1", lw)
	}

	large := bytes.Repeat([]byte("0123456789"), 3*aheadLen/10)
	go srv.Write(answer(large))
	if got := read("large", large); got > aheadLen {
		t.Fatalf("%d bytes read ahead, more than the %d it holds", got, aheadLen)
	}

	pieces := answer(small)
	go func() {
		for _, cut := range [][]byte{pieces[:3], pieces[3:9], pieces[9:]} {
			srv.Write(cut)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	read("in pieces", small)

	// A payload read raises SO_RCVLOWAT (up to the payload's rest); a
	// control answer shorter than that must not wait for more bytes.
	r.setLowat(32 << 10)
	srv.Write(answer(small))
	cli.SetReadDeadline(time.Now().Add(2 * time.Second))
	read("after a payload read", small)
}

// TestHeaderReadWaitsForTheChunkBehindIt: a frame header read that has
// to wait, told a payload of n bytes is expected behind the header,
// returns once the header and those n bytes are there (one wake-up for
// both), never before; without an expectation it waits for one byte.
func TestHeaderReadWaitsForTheChunkBehindIt(t *testing.T) {
	cli, srv := rawTCPPair(t)
	r := newConnReader(cli)
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	payload := bytes.Repeat([]byte("chunk"), 20<<10)
	// frame sends a header after the reader has begun to wait, and its
	// payload later.
	frame := func() {
		time.Sleep(20 * time.Millisecond)
		srv.Write(appendFrameHeader(nil, frameData, len(payload)))
		time.Sleep(30 * time.Millisecond)
		srv.Write(payload)
	}
	readFrame := func(expect int) (lowat, queuedAfterHeader int) {
		t.Helper()
		go frame()
		hdr := make([]byte, frameHeaderLen)
		if _, err := io.ReadFull(readerFunc(func(p []byte) (int, error) { return r.ReadHeader(p, expect) }), hdr); err != nil {
			t.Fatal(err)
		}
		if hdr[0] != frameData {
			t.Fatalf("header %x", hdr)
		}
		lowat, queuedAfterHeader = rcvLowat(t, cli), queued(rawOf(t, cli))
		body := make([]byte, len(payload))
		if _, err := r.ReadFull(body, true); err != nil || !bytes.Equal(body, payload) {
			t.Fatalf("payload: %v", err)
		}
		r.setLowat(1)
		return lowat, queuedAfterHeader
	}
	waited := false
	for range 5 { // a reader descheduled past the header's arrival reads it at once
		lowat, q := readFrame(len(payload))
		if lowat != frameHeaderLen+len(payload) {
			continue
		}
		waited = true
		if q != len(payload) {
			t.Fatalf("a header read that waited for %d bytes behind it returned with %d of them there", len(payload), q)
		}
		break
	}
	if !waited {
		t.Fatal("the header read never had to wait")
	}
	if lowat, _ := readFrame(0); lowat > 1 {
		t.Fatalf("a header read expecting nothing set SO_RCVLOWAT %d", lowat)
	}
	// A wait for more than comes times out with the bytes that came;
	// Unread finds them and lowers the wait to one byte.
	go func() {
		time.Sleep(20 * time.Millisecond)
		srv.Write(appendFrameHeader(nil, frameKeepalive, 0))
	}()
	cli.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	if _, err := r.ReadHeader(make([]byte, frameHeaderLen), 1<<20); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a header read expecting more than comes: %v, want the deadline", err)
	}
	if !r.Unread() {
		t.Fatal("Unread found no bytes behind a timed-out wait")
	}
	if lw := rcvLowat(t, cli); lw != 1 {
		t.Fatalf("SO_RCVLOWAT %d after Unread, want 1", lw)
	}
	cli.SetReadDeadline(time.Now().Add(10 * time.Second))
	hdr := make([]byte, frameHeaderLen)
	if _, err := r.ReadFull(hdr, false); err != nil || hdr[0] != frameKeepalive {
		t.Fatalf("keepalive %x, %v", hdr, err)
	}
	if r.Unread() {
		t.Fatal("Unread with nothing unread")
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }
