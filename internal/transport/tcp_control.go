package transport

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/messages"
)

// hangupDelay is how long a control handler runs before the server
// starts watching its connection for the caller giving up. Most answers
// come well within it (a Locate of an object that exists), and watching
// costs a goroutine and a wakeup per request; a parked request (a Locate
// that waits for a Put) is noticed this much later.
const hangupDelay = 5 * time.Millisecond

// quickScratch is the capacity of a server connection's buffer for the
// replies a QuickController builds: a 1 KiB inline object's answer fits;
// a larger reply grows into a buffer of its own, as any other reply.
const quickScratch = 4 << 10

// readControl reads the rest of a control request whose header is h.
func (sc *serverConn) readControl(h *[reqHeaderLen]byte) (tcpRequest, bool) {
	req := tcpRequest{control: true, version: binary.BigEndian.Uint16(h[4:]), kind: h[6], inc: binary.BigEndian.Uint64(h[24:])}
	n := binary.BigEndian.Uint32(h[8:])
	ms := binary.BigEndian.Uint32(h[12:])
	req.timeout = time.Duration(ms) * time.Millisecond
	switch {
	case req.version != tcpVersion:
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"data protocol version %d not supported: this node speaks version %d", req.version, tcpVersion))
		return tcpRequest{}, false
	case n > MaxControlRequest:
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"control request of %d bytes exceeds %d", n, MaxControlRequest))
		return tcpRequest{}, false
	case ms == 0 || ms > maxControlTimeout:
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"control request timeout %d ms outside 1..%d", ms, maxControlTimeout))
		return tcpRequest{}, false
	}
	req.payload = make([]byte, n)
	if _, err := io.ReadFull(sc.in, req.payload); err != nil {
		sc.s.t.logf("transport: data plane %s: truncated control request from %s: %v", sc.s.addr, sc.peer, err)
		return tcpRequest{}, false
	}
	return req, true
}

// serveControl answers one control request; false drops the connection.
func (sc *serverConn) serveControl(req tcpRequest) bool {
	if req.inc != 0 && req.inc != sc.s.inc {
		return sc.fail(errOtherIncarnation(sc.s.addr, req.inc))
	}
	h, ok := sc.s.src.(Controller)
	if !ok {
		return sc.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %s takes no control requests", sc.s.node))
	}
	if q, ok := h.(QuickController); ok {
		if sc.scratch == nil {
			sc.scratch = make([]byte, 0, quickScratch)
		}
		if reply, ok, err := q.TryControl(req.kind, req.payload, sc.scratch[:0]); ok {
			return sc.answer(reply, err)
		}
	}
	ctx, cancel := context.WithTimeout(sc.s.ctx, req.timeout)
	defer cancel()
	var overParked atomic.Bool
	hung := sc.watchHangup(cancel, func() bool {
		if sc.park() {
			return true
		}
		overParked.Store(true)
		return false
	})
	reply, err := h.Control(ctx, req.kind, req.payload)
	hungUp := hung()
	sc.unpark()
	if hungUp {
		return false // the caller is gone or broke the protocol
	}
	if overParked.Load() {
		err = sc.errTooManyParked()
		sc.s.t.refuseFor(refusedParked, sc.key, sc.peer, err)
	}
	return sc.answer(reply, err)
}

// answer writes a control handler's answer; false drops the connection.
func (sc *serverConn) answer(reply []byte, err error) bool {
	if err == nil && len(reply) > MaxControlReply {
		err = messages.Errorf(messages.ErrorCode_INTERNAL, "control reply of %d bytes exceeds %d", len(reply), MaxControlReply)
	}
	if err != nil {
		return sc.fail(err)
	}
	return sc.writeFrame(frameControl, reply) == nil
}

// watchHangup cancels a control handler whose caller closes the
// connection (or sends anything: a caller waits for the answer in
// silence). It starts only after hangupDelay, and only if park (if
// given) says the request may wait; if not, it cancels at once. The
// returned stop ends the watch and says whether the caller hung up; the
// connection is then unusable.
func (sc *serverConn) watchHangup(cancel context.CancelFunc, park func() bool) (stop func() bool) {
	var (
		mu      sync.Mutex
		stopped bool
		hung    bool
		done    chan struct{}
	)
	t := time.AfterFunc(hangupDelay, func() {
		defer func() { sc.s.t.recovered("watching a parked request", sc.peer, recover()) }()
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		if park != nil && !park() {
			mu.Unlock()
			cancel()
			return
		}
		// Under mu: a stop that sees done sets its deadline after this.
		sc.nc.SetReadDeadline(time.Time{})
		done = make(chan struct{})
		mu.Unlock()
		defer close(done)
		var b [1]byte
		_, err := sc.nc.Read(b[:])
		if err != nil && isTimeout(err) {
			return // stop interrupted the read: the handler answered
		}
		mu.Lock()
		hung = true
		mu.Unlock()
		cancel()
	})
	return func() bool {
		t.Stop()
		mu.Lock()
		stopped = true
		d := done
		mu.Unlock()
		if d != nil {
			sc.nc.SetReadDeadline(time.Unix(1, 0))
			<-d
		}
		mu.Lock()
		defer mu.Unlock()
		return hung
	}
}

// Call implements Caller. Connections are the streams' pool: a control
// exchange ends on a frame boundary, so the connection goes back to it.
func (t *TCP) Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	if err := checkCall(ctx, addr, req); err != nil {
		return nil, err
	}
	_, inc, err := splitAddress(addr)
	if err != nil {
		return nil, err
	}
	deadline, _ := ctx.Deadline()
	msg := encodeControl(kind, req, time.Until(deadline), inc)
	for {
		c, reused, err := t.getConn(ctx, addr)
		if err != nil {
			return nil, err
		}
		reply, got, err := t.call(ctx, c, msg)
		if err == nil {
			return reply, nil
		}
		// A pooled connection the peer closed while idle fails before
		// answering anything: try the next one, or a fresh one. Not one
		// that ForgetPeer closed: the peer is gone, and the caller asks
		// where its view now says.
		if reused && got == 0 && ctx.Err() == nil && errors.Is(err, messages.ErrUnavailable) && !c.gone.Load() {
			continue
		}
		return nil, err
	}
}

// call runs one exchange on c and gives c back (to the pool if it ended
// on a frame boundary). got counts the answer's bytes received.
func (t *TCP) call(ctx context.Context, c *tcpConn, msg []byte) (reply []byte, got int, err error) {
	inStep := false
	defer func() {
		if inStep {
			t.putConn(c)
		} else {
			t.dropConn(c)
		}
	}()
	stop := watch(ctx, c)
	defer stop()
	deadline, _ := ctx.Deadline()
	c.nc.SetWriteDeadline(deadline)
	if err := c.write(msg); err != nil {
		if c.gone.Load() {
			return nil, 0, errPeerGone(c.addr)
		}
		if err := ctxErr(ctx); err != nil {
			return nil, 0, err
		}
		return nil, 0, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "control request to data peer %s: %v", c.addr, err)
	}
	c.nc.SetReadDeadline(deadline)
	if err := ctxErr(ctx); err != nil { // after setting the deadline: see watch
		return nil, 0, err
	}
	var head [preambleLen + frameHeaderLen]byte
	n, err := c.r.ReadHead(head[:])
	got += n
	if err != nil {
		return nil, got, t.callReadError(ctx, c, err, got == 0)
	}
	if [4]byte(head[:4]) != respMagic {
		return nil, got, t.callProtocolError(c, "not a data plane answer (magic %q)", head[:4])
	}
	if v := binary.BigEndian.Uint16(head[4:]); v != tcpVersion {
		return nil, got, t.callProtocolError(c, "it speaks data protocol version %d, this node speaks version %d", v, tcpVersion)
	}
	kind, size := head[preambleLen], binary.BigEndian.Uint32(head[preambleLen+1:])
	switch {
	case kind == frameControl && size <= MaxControlReply:
	case kind == frameError && size >= 2 && size <= 2+maxErrMsg:
	default:
		return nil, got, t.callProtocolError(c, "frame %q of %d bytes in answer to a control request", kind, size)
	}
	// The answer's body goes into a buffer of its own, which the caller
	// keeps (a Locate's inline object becomes the store's buffer as it
	// is): it is written whole, so not zeroed first. Most of it came with
	// the header (ReadHead); a longer one's rest is read straight into it.
	p := bufalloc.Make(int(size))
	n, err = c.r.ReadFull(p, false)
	got += n
	if err != nil {
		return nil, got, t.callReadError(ctx, c, err, false)
	}
	inStep = true
	if kind == frameError {
		e, ok := decodeError(p, c.addr)
		if !ok {
			inStep = false
			return nil, got, t.callProtocolError(c, "malformed error frame")
		}
		return nil, got, answered{e}
	}
	return p, got, nil
}

// callReadError is the error of a control exchange whose read failed;
// silent: no byte of the answer came.
func (t *TCP) callReadError(ctx context.Context, c *tcpConn, err error, silent bool) error {
	if c.gone.Load() {
		return errPeerGone(c.addr)
	}
	if cerr := ctxErr(ctx); cerr != nil {
		if silent && errors.Is(cerr, messages.ErrTimeout) {
			t.stalled(c.addr) // see stalled: the peer may answer nothing on any of them
		}
		return cerr
	}
	if isTimeout(err) { // the deadline, a hair before ctx saw it
		if silent {
			t.stalled(c.addr)
		}
		return messages.AsError(context.DeadlineExceeded)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data peer %s closed the connection during a control request", c.addr)
	}
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data peer %s: %v (control request)", c.addr, err)
}

func (t *TCP) callProtocolError(c *tcpConn, format string, args ...any) error {
	err := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data peer %s broke the protocol: "+format, append([]any{c.addr}, args...)...)
	t.logf("transport: %v; dropping connection", err)
	return err
}

// errPeerGone is the error of an exchange whose connection ForgetPeer
// closed under it.
func errPeerGone(addr string) error {
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data peer %s left the cluster during a control request", addr)
}
