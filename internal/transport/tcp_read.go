package transport

import (
	"io"
	"net"
	"syscall"
)

// connReader reads the answers on a client connection, so that a data
// frame's payload crosses this side once: the kernel's copy from the
// socket straight into the caller's buffer (the object's, for NextInto),
// never through a buffer of ours.
//
// Frame headers are read exactly, never past their end, and a payload is
// read together with the next frame's header behind it: on a plain TCP
// socket one readv(2) fills the rest of the payload and then up to a
// header's worth of bytes into look, which the next header read takes
// without a system call. look holds no payload byte but the few of an
// unexpected frame, and what is in it at a stream's end is bytes past
// that end (Buffered), which a conforming peer never sends.
//
// A payload read also tells the kernel not to wake the reader before
// min(the payload's rest, payloadLowat) bytes are there (SO_RCVLOWAT;
// never more than the frame still holds, so it cannot wait for bytes
// that will not come): at 400 Mbit/s a receiver woken by every few
// segments made some 1,400 wake-ups and reads per 32 MiB. A stream's
// header read after a whole chunk waits for the next chunk too
// (ReadHeader). Reads of anything else wait for one byte, as by
// default. A peer that sends a frame's bytes slower than 256 KiB (64 KiB
// under TLS) per StallTimeout (9 KiB/s at the default 30 s) looks
// stalled: a conforming sender writes a frame's payload whole, at the
// link's pace. Under TLS a payload read never waits for more than the
// payload's rest less a record's plaintext (see tlsRecordPlaintext).
type connReader struct {
	nc net.Conn
	// raw is the TCP socket under nc (under its TLS, if any); nil if nc
	// is not a TCP connection.
	raw syscall.RawConn
	// plain: nc is the TCP connection itself, whose socket a payload
	// read can read past the payload's end.
	plain bool
	look  [frameHeaderLen]byte
	lookR int
	lookW int
	// lowat is the socket's SO_RCVLOWAT as last set (0 or 1: the
	// kernel's default of one byte).
	lowat int
	// relayed counts payload bytes that went through look: none from a
	// peer that keeps to the protocol (a payload is always followed by a
	// frame header, or by nothing).
	relayed int64
	// ahead holds the bytes a control answer's header read took behind
	// the header (ReadHead): its body, most often whole. aheadR and
	// aheadW are its read and write ends. Allocated at the first control
	// answer, aheadLen bytes.
	ahead          []byte
	aheadR, aheadW int
}

// aheadLen is how much of a control answer's body ReadHead takes with
// its header: a Locate's answer with a 1 KiB object inline, a
// SubscribeBatch's answer for a handful of sources. A longer body's rest
// is read on its own.
const aheadLen = 4 << 10

// payloadLowat caps the SO_RCVLOWAT of a payload read on a plain TCP
// socket: a 256 KiB chunk (the chunk at 400 Mbit/s) wakes its reader
// once. The reader can do nothing with a chunk before its last byte (a
// relay forwards, a Reduce combines, whole chunks), so waiting for all
// of it costs no latency but the copy of the last bytes. The kernel
// grows the socket's receive buffer to hold what a raised SO_RCVLOWAT
// asks for (and never past half its tcp_rmem maximum), so the sender's
// window never falls short of it. At 64 KiB, a 32 MiB broadcast to 7 on
// the testbed made about 3,200 context switches per operation, summed
// over the members; at 256 KiB about 2,800 (docs/benchmarks.md, "Fewer
// wake-ups").
const payloadLowat = 256 << 10

// tlsPayloadLowat is payloadLowat under TLS, where crypto/tls reads the
// socket a record at a time and may hold bytes it read ahead: the socket
// may never see a payload's whole rest, so asking for less leaves room.
const tlsPayloadLowat = 64 << 10

// tlsRecordPlaintext is the most plaintext one TLS record carries.
// crypto/tls reads the socket only when it holds no whole record, and
// then at most the start of one: the socket still gets all of a
// payload's rest but that record's share, so a wait for the rest less
// tlsRecordPlaintext bytes always ends. A wait for the whole rest, once
// crypto/tls held the start of its last record, waited for bytes that
// never came, to the read deadline: a fetch of an object of one chunk
// stalled at offset 0 every time it met that timing.
const tlsRecordPlaintext = 16 << 10

func newConnReader(nc net.Conn) *connReader {
	r := &connReader{nc: nc}
	under := nc
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		under = tc.NetConn()
	}
	if tcp, ok := under.(*net.TCPConn); ok {
		if raw, err := tcp.SyscallConn(); err == nil {
			r.raw, r.plain = raw, canReadPast && under == nc
		}
	}
	return r
}

// Buffered is how many bytes were read past the last frame read.
func (r *connReader) Buffered() int { return r.lookW - r.lookR + r.aheadW - r.aheadR }

// ReadHead reads exactly len(head) bytes, a control answer's preamble
// and frame header, and on a plain TCP socket also up to aheadLen bytes
// behind them (its body), which the next reads take without a system
// call. A control call so reads its answer with one readv(2) where a
// header read and a body read took two, each after a setsockopt(2) of
// SO_RCVLOWAT (one byte, then the body's length): a third of the system
// calls of a Locate's round trip on the caller's side. A control answer
// is the last thing on the connection until the next request, so what
// the read takes behind the header is the answer's.
func (r *connReader) ReadHead(head []byte) (int, error) {
	if !r.plain || !canRawIO || r.Buffered() > 0 {
		return io.ReadFull(r, head)
	}
	if r.ahead == nil {
		r.ahead = make([]byte, aheadLen)
	}
	r.setLowat(1)
	n := 0
	for n < len(head) {
		iov := [2][]byte{head[n:], r.ahead}
		got, err := rawRead(r.raw, iov[:])
		m := min(got, len(head)-n)
		n += m
		r.aheadR, r.aheadW = 0, got-m
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			return n, err
		}
	}
	return n, nil
}

// Read reads at most len(p) bytes of anything but a payload, never past
// len(p): a preamble, a frame header, an error frame's or a control
// answer's body.
func (r *connReader) Read(p []byte) (int, error) {
	if n := r.fromLook(p); n > 0 {
		return n, nil
	}
	r.setLowat(1)
	if r.plain && canRawIO {
		iov := [1][]byte{p}
		return rawRead(r.raw, iov[:])
	}
	return r.nc.Read(p)
}

// ReadHeader reads at most len(p) bytes of a stream's frame header, as
// Read does, except that when it has to wait on a plain TCP socket, it
// waits for the header and expect bytes behind it (SO_RCVLOWAT): the
// next frame's payload, as long as the last one, which a sender of whole
// chunks sends right behind its header. The payload read after it then
// finds its bytes there, and a chunk wakes its reader once where it woke
// it twice (for the header, which came first, then for the rest of the
// payload). expect 0 waits for one byte, as Read. A sender that sends
// less (a keepalive, an error frame, a shorter frame) leaves the wait to
// the read deadline, which the caller keeps short: see tcpStream.fill.
func (r *connReader) ReadHeader(p []byte, expect int) (int, error) {
	if expect <= 0 || !r.plain || !canRawIO {
		return r.Read(p)
	}
	if n := r.fromLook(p); n > 0 {
		return n, nil
	}
	// Raised only when the read has to wait: bytes that are there are
	// read at once.
	lowat := len(p) + min(expect, payloadLowat)
	iov := [1][]byte{p}
	return rawReadOr(r.raw, iov[:], func(fd uintptr) {
		if lowat != r.lowat && setRcvLowatFD(fd, lowat) == 0 {
			r.lowat = lowat
		}
	})
}

// Unread reports whether the socket holds bytes not read yet, and lowers
// its SO_RCVLOWAT to one byte if so: a wait for more than came (see
// ReadHeader) timed out on bytes that did come.
func (r *connReader) Unread() bool {
	if r.raw == nil || r.lowat <= 1 {
		return false
	}
	if queued(r.raw) <= 0 {
		return false
	}
	r.setLowat(1)
	return true
}

// ReadPayload reads at most len(p) bytes of a data payload, len(p) being
// what is left of it, and on a plain TCP socket up to a frame header's
// bytes behind it into look.
func (r *connReader) ReadPayload(p []byte) (int, error) {
	if n := r.fromLook(p); n > 0 {
		r.relayed += int64(n)
		return n, nil
	}
	if !r.plain {
		r.setLowat(max(1, min(len(p)-tlsRecordPlaintext, tlsPayloadLowat)))
		return r.nc.Read(p)
	}
	r.setLowat(min(len(p), payloadLowat))
	r.lookR, r.lookW = 0, 0
	n, past, err := readPast(r.raw, p, r.look[:])
	r.lookW = past
	return n, err
}

// ReadFull reads exactly len(p) bytes, a payload's (ReadPayload) if
// payload; short of them it returns io.ErrUnexpectedEOF or the error
// that stopped it.
func (r *connReader) ReadFull(p []byte, payload bool) (int, error) {
	n := 0
	for n < len(p) {
		var m int
		var err error
		if payload {
			m, err = r.ReadPayload(p[n:])
		} else {
			m, err = r.Read(p[n:])
		}
		n += m
		if err != nil {
			if err == io.EOF && n > 0 {
				err = io.ErrUnexpectedEOF
			}
			if n < len(p) {
				return n, err
			}
		}
	}
	return n, nil
}

func (r *connReader) fromLook(p []byte) int {
	if r.lookR == r.lookW {
		if r.aheadR == r.aheadW {
			return 0
		}
		n := copy(p, r.ahead[r.aheadR:r.aheadW])
		r.aheadR += n
		return n
	}
	n := copy(p, r.look[r.lookR:r.lookW])
	r.lookR += n
	return n
}

// setLowat sets the socket's SO_RCVLOWAT to n unless it is already n. A
// socket that refuses keeps its old one: n only saves wake-ups, and a
// lower one than asked only costs some.
func (r *connReader) setLowat(n int) {
	if r.raw == nil || n == r.lowat || (n <= 1 && r.lowat <= 1) {
		return
	}
	if setRcvLowat(r.raw, n) == nil {
		r.lowat = n
	}
}
