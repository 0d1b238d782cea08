package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/messages"
)

// TCPConfig configures a TCP transport. Zero fields take defaults.
type TCPConfig struct {
	// ListenAddr is where Serve listens; default "127.0.0.1:0" (a free
	// port). The bound address is the node's data address, so use a host
	// that peers can reach rather than a wildcard.
	ListenAddr string
	// DialTimeout bounds a dial (default 10s); the Open ctx bounds it too.
	DialTimeout time.Duration
	// IdleTimeout closes a served connection that carries no request for
	// this long; the client drops pooled connections idle for half of it,
	// closing them within three quarters of it whether or not it dials
	// that peer again (default 90s).
	IdleTimeout time.Duration
	// StallTimeout fails a stream and drops its connection when the peer
	// neither reads (sender side) nor sends (receiver side) for this long
	// (default 30s). A sender waiting for a partial copy sends keepalives
	// every third to half of the receiver's StallTimeout.
	StallTimeout time.Duration
	// RequestTimeout bounds how long a request header may take to arrive:
	// the whole first request of a new connection, and each later one
	// once its first byte came (default 10s). A client that connects and
	// trickles or says nothing is dropped after it.
	RequestTimeout time.Duration
	// MaxServerConns bounds the connections a served address holds at once
	// (default 1024); more are closed as they arrive.
	MaxServerConns int
	// HandshakeTimeout bounds how long a new served connection may take
	// to finish its TLS handshake and send its first request, both
	// together, from its accept (default 5s; never more than
	// RequestTimeout for the request). Until then it is pending (see
	// MaxPendingConns). A member's client sends its request as soon as
	// it dialed, so on a live network it takes a few round trips: 5 s
	// leaves room for a loaded machine and still bounds how long a
	// silent connection holds a pending slot.
	HandshakeTimeout time.Duration
	// MaxPendingConns bounds the connections of a served address that
	// are pending: accepted, but their handshake or first request not
	// done (default MaxServerConns/4). More are closed as they arrive,
	// so that connections that say nothing cannot take the slots that
	// peers with requests need.
	MaxPendingConns int
	// MaxPendingPerSource bounds the pending connections from one IP
	// address (default MaxServerConns/8, 128): one host that opens
	// connections and says nothing fills half the pending budget at
	// most. Members on one host all connect from the same address (a
	// test cluster's from 127.0.0.1); a connection is pending only for
	// the round trips before its first request, so even 48 members that
	// dial at once stay well below it.
	MaxPendingPerSource int
	// MaxConnsPerSource bounds the established connections (past their
	// first request) from one source (default MaxServerConns/2, 512).
	// The source is the IP address and, under TLS, the client
	// certificate's identity. Members on one host share their address,
	// and each member keeps up to MaxConnsPerPeer (4) idle connections
	// to each peer plus one per stream or control call it runs there: 48
	// members on one host keep 192 idle and have 320 more for concurrent
	// requests. A peer elsewhere that holds this many leaves the other
	// half of MaxServerConns to everyone else.
	MaxConnsPerSource int
	// MaxParkedPerSource bounds the requests of one source that wait
	// (a stream for its object, a control request for its answer) for
	// more than a few milliseconds at once (default MaxConnsPerSource
	// *3/4, 384); more are answered RESOURCE_EXHAUSTED at once. Each
	// holds a connection, so a source that parks requests on all of its
	// MaxConnsPerSource would leave none for the requests that answer at
	// once, its own or those of the members that share its address: a
	// quarter of them stays for those.
	MaxParkedPerSource int
	// MinChunk is the smallest data frame a served stream is cut into
	// (default DefaultMinChunk). A request for smaller chunks is refused
	// INVALID_ARGUMENT, and Open asks for at least this much: a reader
	// that asked a large object in one-byte chunks would have its sender
	// read, frame and write each byte on its own, a million times the
	// work of the same bytes in 64 KiB.
	MinChunk int
	// MaxConnsPerPeer bounds the idle connections kept for reuse per peer
	// (default 4). Streams beyond it dial connections of their own, closed
	// when they end.
	MaxConnsPerPeer int
	// Log, if set, receives dropped connections and protocol violations.
	Log func(format string, args ...any)
	// TLS, if set, runs the data plane over mutual TLS: served connections
	// must present a client certificate that TLS.ClientCAs verifies (set
	// ClientAuth to tls.RequireAndVerifyClientCert), and dials present
	// TLS.Certificates and verify the server against TLS.RootCAs. Without
	// it anyone who reaches the data port could read any object.
	TLS *tls.Config
	// Refused, if set, receives connections refused by the TLS handshake
	// (peer address and why); default Log. A member logs them at warn.
	// Like Limited, it is called at most once per source every 5 s; a
	// line after refusals it did not get says how many there were.
	Refused func(peer string, err error)
	// Limited, if set, receives connections and requests refused by a
	// limit (MaxServerConns, the pending and per-source limits,
	// HandshakeTimeout), and panics recovered while serving; default
	// Log. It is rate limited as Refused is. A member logs them at warn.
	Limited func(peer string, err error)
	// Pace, if set, is the rate in bytes per second at which this node
	// sends the streams opened with OpenPaced, all of them together, in
	// turn chunk by chunk (see EgressPacer): its link's payload rate.
	// It is read at every chunk; <= 0, or nil, sends them unpaced.
	Pace func() float64
}

// TCP is the Transport between store nodes in different processes: a
// dedicated data plane of direct TCP connections, one stream at a time
// per connection, pull-based (TCP's window is the flow control: a
// receiver that stops reading blocks the sender's Write, which holds at
// most one chunk), pipelined (the sender writes each chunk as soon as its
// copy has it). The wire format is in tcp_frame.go.
type TCP struct {
	cfg TCPConfig

	mu      sync.Mutex
	closed  bool
	servers map[string]*tcpServer // by data address
	nodes   map[string]string     // node -> data address
	pool    map[string][]*tcpConn // idle client connections by peer
	active  map[*tcpConn]struct{} // client connections carrying a stream

	dials      atomic.Int64 // client connections dialed
	keepalives atomic.Int64 // keepalive frames sent
	pacer      *EgressPacer // the paced streams this node sends

	// reaper closes pooled connections idle too long; armed while the
	// pool holds any (see reap).
	reaper *time.Timer

	refusals [numRefusals]atomic.Int64
	panics   atomic.Int64
	reaped   atomic.Int64
	rlog     refusalLog
}

var (
	_ Transport   = (*TCP)(nil)
	_ PacedOpener = (*TCP)(nil)
)

// PacedBytes is how many bytes this node sent on streams opened with
// OpenPaced.
func (t *TCP) PacedBytes() int64 { return t.pacer.Bytes() }

// NewTCP returns a TCP transport; Close stops it.
func NewTCP(cfg TCPConfig) *TCP {
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 90 * time.Second
	}
	if cfg.StallTimeout <= 0 {
		cfg.StallTimeout = 30 * time.Second
	}
	if cfg.MaxConnsPerPeer <= 0 {
		cfg.MaxConnsPerPeer = 4
	}
	if cfg.MinChunk <= 0 {
		cfg.MinChunk = DefaultMinChunk
	}
	cfg.MinChunk = min(cfg.MinChunk, maxChunk)
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.MaxServerConns <= 0 {
		cfg.MaxServerConns = 1024
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	if cfg.MaxPendingConns <= 0 {
		cfg.MaxPendingConns = max(cfg.MaxServerConns/4, 1)
	}
	if cfg.MaxPendingPerSource <= 0 {
		cfg.MaxPendingPerSource = max(cfg.MaxServerConns/8, 1)
	}
	if cfg.MaxConnsPerSource <= 0 {
		cfg.MaxConnsPerSource = max(cfg.MaxServerConns/2, 1)
	}
	if cfg.MaxParkedPerSource <= 0 {
		cfg.MaxParkedPerSource = max(cfg.MaxConnsPerSource*3/4, 1)
	}
	return &TCP{
		pacer:   &EgressPacer{rate: cfg.Pace},
		cfg:     cfg,
		servers: map[string]*tcpServer{},
		nodes:   map[string]string{},
		pool:    map[string][]*tcpConn{},
		active:  map[*tcpConn]struct{}{},
	}
}

func (t *TCP) logf(format string, args ...any) {
	if t.cfg.Log != nil {
		t.cfg.Log(format, args...)
	}
}

// Close stops every server and closes every connection; open streams
// fail with UNAVAILABLE. The transport cannot be used afterwards.
func (t *TCP) Close() {
	t.mu.Lock()
	t.closed = true
	var addrs []string
	for addr := range t.servers {
		addrs = append(addrs, addr)
	}
	var conns []*tcpConn
	for _, list := range t.pool {
		conns = append(conns, list...)
	}
	for c := range t.active {
		conns = append(conns, c)
	}
	t.pool = map[string][]*tcpConn{}
	if t.reaper != nil {
		t.reaper.Stop()
		t.reaper = nil
	}
	t.mu.Unlock()
	for _, c := range conns {
		c.nc.Close()
	}
	for _, addr := range addrs {
		t.Unserve(addr)
	}
}

// ---------------------------------------------------------------- server

type tcpServer struct {
	t    *TCP
	node string
	src  Source
	ln   net.Listener
	addr string // host:port#inc
	// inc is this endpoint's incarnation: requests that name another are
	// refused (see the wire format).
	inc    uint64
	ctx    context.Context // ends when the server stops
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	// pending counts the connections not established yet; sources what
	// each source holds (see tcp_admit.go).
	pending int
	sources map[string]*sourceCount
}

// Serve implements Transport: it listens on ListenAddr and returns the
// bound "host:port" with the endpoint's incarnation ("host:port#<16 hex
// digits>", new at every Serve): requests to that address are served by
// this endpoint only, never by a later one that listens at host:port.
// Serving a node again replaces its old endpoint.
func (t *TCP) Serve(node string, src Source) (string, error) {
	if src == nil {
		return "", messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "serve %s: nil source", node)
	}
	t.mu.Lock()
	closed, old := t.closed, t.nodes[node]
	t.mu.Unlock()
	if closed {
		return "", messages.Errorf(messages.ErrorCode_UNAVAILABLE, "serve %s: transport closed", node)
	}
	if old != "" {
		t.Unserve(old)
	}
	lc := net.ListenConfig{KeepAliveConfig: KeepAlive}
	ln, err := lc.Listen(context.Background(), "tcp", t.cfg.ListenAddr)
	if err != nil {
		return "", messages.Errorf(messages.ErrorCode_UNAVAILABLE, "serve %s: data plane cannot listen: %v", node, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inc := newIncarnation()
	srv := &tcpServer{t: t, node: node, src: src, ln: ln, addr: fmt.Sprintf("%s#%016x", ln.Addr(), inc), inc: inc,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, sources: map[string]*sourceCount{}}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		cancel()
		ln.Close()
		return "", messages.Errorf(messages.ErrorCode_UNAVAILABLE, "serve %s: transport closed", node)
	}
	t.servers[srv.addr] = srv
	t.nodes[node] = srv.addr
	t.mu.Unlock()
	srv.wg.Add(1)
	go srv.accept()
	return srv.addr, nil
}

// newIncarnation is a random endpoint incarnation, never 0 (which names
// none).
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if inc := binary.BigEndian.Uint64(b[:]); inc != 0 {
			return inc
		}
	}
}

// Unserve implements Transport: it closes the listener and every
// connection it serves, and waits for their goroutines.
func (t *TCP) Unserve(addr string) {
	t.mu.Lock()
	srv := t.servers[addr]
	delete(t.servers, addr)
	if srv != nil && t.nodes[srv.node] == addr {
		delete(t.nodes, srv.node)
	}
	// Pooled connections to it are dead now.
	stale := t.pool[addr]
	delete(t.pool, addr)
	t.mu.Unlock()
	for _, c := range stale {
		c.nc.Close()
	}
	if srv != nil {
		srv.stop()
	}
}

func (s *tcpServer) stop() {
	s.cancel()
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *tcpServer) connCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

func (s *tcpServer) accept() {
	defer s.wg.Done()
	var backoff time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, bounded.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.t.logf("transport: data plane %s: accept: %v; retrying in %v", s.addr, err, backoff)
			tm := time.NewTimer(backoff)
			select {
			case <-tm.C:
			case <-s.ctx.Done():
				tm.Stop()
				return
			}
			continue
		}
		backoff = 0
		if !s.admit(nc) {
			return
		}
	}
}

// admit serves an accepted connection, or closes it if a limit refuses
// it; false if the server is stopping.
func (s *tcpServer) admit(nc net.Conn) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		nc.Close()
		return false
	}
	ip := sourceIP(nc.RemoteAddr())
	reason, ok := s.admitLocked(nc, ip)
	if !ok {
		s.mu.Unlock()
		s.refuseAtAccept(reason, ip, nc.RemoteAddr().String())
		nc.Close()
		return true
	}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.serveConn(nc, ip, time.Now())
	return true
}

// refuseAtAccept counts and logs a connection closed as it arrived.
func (s *tcpServer) refuseAtAccept(reason refusal, ip, peer string) {
	cfg := &s.t.cfg
	var err error
	switch reason {
	case refusedTotal:
		err = fmt.Errorf("data plane %s: %d connections open (MaxServerConns)", s.addr, cfg.MaxServerConns)
	case refusedPending:
		err = fmt.Errorf("data plane %s: %d connections wait for their handshake or first request (MaxPendingConns)", s.addr, cfg.MaxPendingConns)
	default:
		err = fmt.Errorf("data plane %s: %d connections from %s wait for their handshake or first request (MaxPendingPerSource)", s.addr, cfg.MaxPendingPerSource, ip)
	}
	s.t.refuseFor(reason, ip, peer, err)
}

type serverConn struct {
	s  *tcpServer
	nc net.Conn
	// accepted is the connection as accepted (nc may wrap it in TLS).
	accepted net.Conn
	// ip is the peer's address, key its source once established (see
	// tcp_admit.go); parked: one of its requests counts as parked.
	ip          string
	key         string
	established bool
	parked      bool
	released    bool // the connection ended: it counts nowhere any more
	// admitBy is when the handshake and first request must be done.
	admitBy time.Time
	// lateFirst: the first request did not come by admitBy.
	lateFirst bool
	// raw is nc's socket when nc is plain TCP and canRawIO: frames are
	// written with raw system calls.
	raw syscall.RawConn
	// in reads the requests: through a buffer, so that one read takes a
	// control request's header and body (or a stream request's header
	// and id) where three reads did, and on a plain TCP socket with raw
	// system calls (see rawReader).
	in   *bufio.Reader
	peer string
	hbuf []byte // frame headers (and the preamble)
	// scratch is where a QuickController builds its replies
	// (quickScratch).
	scratch []byte
	vec     [2][]byte
	// preamble is due before the stream's first frame.
	preamble bool
	// requests counts the requests read (the first has a shorter wait).
	requests int

	// The keepalive watchdog: a Source call still waiting after a whole
	// interval has its context canceled, so that the stream sends a
	// keepalive and calls again. A timer ticking every half interval per
	// stream, rather than a timer per call, keeps the fast path (data
	// already there) free of timer churn and the wakeups it causes.
	wmu      sync.Mutex
	armed    bool
	interval time.Duration
	since    time.Time // start of the pending Source call; zero if none
	expired  bool      // the watchdog canceled callCtx
	callCtx  context.Context
	callStop context.CancelFunc
	watchdog *time.Timer
	// A Source call that a tick finds still running parks the stream:
	// it counts against MaxParkedPerSource (overParked if that refused
	// it), and the connection is watched for the receiver hanging up
	// until the call returns (stopHangup ends the watch): a receiver
	// that left ends the wait at once rather than at the next keepalive
	// that cannot be sent.
	parkTried  bool
	overParked bool
	stopHangup func() bool
}

func (s *tcpServer) serveConn(nc net.Conn, ip string, accepted time.Time) {
	sc := &serverConn{s: s, nc: nc, accepted: nc, ip: ip, peer: nc.RemoteAddr().String(), hbuf: make([]byte, 0, 64),
		admitBy: accepted.Add(s.t.cfg.HandshakeTimeout)}
	defer func() {
		// A bug while serving one connection ends that connection, not
		// the process.
		s.t.recovered("serving a data plane connection", sc.peer, recover())
		sc.stopWatchdog()
		nc.Close()
		sc.release()
		s.wg.Done()
	}()
	if tcp, ok := nc.(*net.TCPConn); ok && canRawIO && s.t.cfg.TLS == nil {
		if raw, err := tcp.SyscallConn(); err == nil {
			sc.raw = raw
		}
	}
	if cfg := s.t.cfg.TLS; cfg != nil {
		tc := tls.Server(nc, cfg)
		ctx, cancel := context.WithDeadline(s.ctx, sc.admitBy)
		err := tc.HandshakeContext(ctx)
		late := errors.Is(err, context.DeadlineExceeded)
		cancel()
		if err != nil {
			err = fmt.Errorf("TLS handshake on data port %s: %w", s.addr, err)
			switch {
			case s.ctx.Err() != nil:
			case late:
				s.t.refuseFor(refusedTimeout, ip, sc.peer, fmt.Errorf("%w (not done within HandshakeTimeout, %v)", err, s.t.cfg.HandshakeTimeout))
			default:
				s.t.refuseFor(refusedHandshake, ip, sc.peer, err)
			}
			return
		}
		sc.nc = tc
	}
	if sc.raw != nil {
		sc.in = bufio.NewReaderSize(rawReader{sc.raw}, requestBuffer)
	} else {
		sc.in = bufio.NewReaderSize(sc.nc, requestBuffer)
	}
	for {
		req, ok := sc.readRequest()
		if !ok {
			if sc.lateFirst && s.ctx.Err() == nil {
				s.t.refuseFor(refusedTimeout, ip, sc.peer, fmt.Errorf("data plane %s: no request within HandshakeTimeout (%v) of connecting", s.addr, s.t.cfg.HandshakeTimeout))
			}
			return
		}
		if !sc.established && !sc.establish() {
			err := messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED, "data plane %s: %d connections from %s are open already (MaxConnsPerSource); try again later",
				s.addr, s.t.cfg.MaxConnsPerSource, sc.ip)
			s.t.refuseFor(refusedSource, ip, sc.peer, err)
			sc.refuse(err)
			return
		}
		if req.control {
			ok = sc.serveControl(req)
		} else {
			ok = sc.serveStream(req)
		}
		if !ok {
			return
		}
	}
}

// requestBuffer is the size of a server connection's request buffer:
// a stream request, or a control request such as a Locate, whole.
const requestBuffer = 4 << 10

// rawReader reads a plain TCP socket with raw system calls (rawRead),
// within its read deadline.
type rawReader struct{ raw syscall.RawConn }

func (r rawReader) Read(p []byte) (int, error) {
	iov := [1][]byte{p}
	return rawRead(r.raw, iov[:])
}

// readRequest reads the next request; false drops the connection (after
// telling the peer why, where the protocol allows).
func (sc *serverConn) readRequest() (tcpRequest, bool) {
	cfg := &sc.s.t.cfg
	var h [reqHeaderLen]byte
	first := sc.requests == 0
	sc.requests++
	// A new connection comes with its request: the whole of it is due
	// by admitBy.
	firstDL := func(d time.Duration) time.Time {
		dl := time.Now().Add(d)
		if first && sc.admitBy.Before(dl) {
			return sc.admitBy
		}
		return dl
	}
	idle := cfg.IdleTimeout
	if first {
		idle = min(idle, cfg.RequestTimeout)
	}
	sc.nc.SetReadDeadline(firstDL(idle))
	if _, err := io.ReadFull(sc.in, h[:1]); err != nil {
		sc.lateFirst = first && isTimeout(err)
		return tcpRequest{}, false // closed by the peer, idle, or stopping
	}
	sc.nc.SetReadDeadline(firstDL(min(cfg.RequestTimeout, cfg.StallTimeout)))
	if _, err := io.ReadFull(sc.in, h[1:]); err != nil {
		sc.lateFirst = first && isTimeout(err)
		sc.s.t.logf("transport: data plane %s: truncated request from %s: %v", sc.s.addr, sc.peer, err)
		return tcpRequest{}, false
	}
	control := bytes.Equal(h[:4], ctlMagic[:])
	if !control && !bytes.Equal(h[:4], reqMagic[:]) {
		sc.s.t.logf("transport: data plane %s: not a data request from %s (magic %q); dropping connection", sc.s.addr, sc.peer, h[:4])
		return tcpRequest{}, false
	}
	sc.preamble = true
	if control {
		return sc.readControl(&h)
	}
	req := parseRequestHeader(&h)
	if req.version != tcpVersion {
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"data protocol version %d not supported: this node speaks version %d", req.version, tcpVersion))
		return tcpRequest{}, false
	}
	if req.badFlags {
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "request with unknown flags"))
		return tcpRequest{}, false
	}
	if req.idLen > maxIDLen {
		sc.refuse(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"object id of %d bytes exceeds %d", req.idLen, maxIDLen))
		return tcpRequest{}, false
	}
	id := make([]byte, req.idLen)
	if _, err := io.ReadFull(sc.in, id); err != nil {
		sc.lateFirst = sc.requests == 1 && isTimeout(err)
		sc.s.t.logf("transport: data plane %s: truncated request from %s: %v", sc.s.addr, sc.peer, err)
		return tcpRequest{}, false
	}
	req.id = string(id)
	return req, true
}

// refuse answers a request that breaks the protocol with an error frame,
// then closes gracefully: the peer's unread request bytes are drained
// (bounded) so that the close does not reset the answer away.
func (sc *serverConn) refuse(err error) {
	sc.s.t.logf("transport: data plane %s: refusing %s: %v", sc.s.addr, sc.peer, err)
	if sc.writeFrame(frameError, errorPayload(err)) != nil {
		return
	}
	// Half-close so the answer is not reset away (a TLS conn sends its
	// close_notify and closes the write side of the TCP connection).
	if tc, ok := sc.nc.(interface{ CloseWrite() error }); ok {
		tc.CloseWrite()
	}
	sc.nc.SetReadDeadline(time.Now().Add(min(sc.s.t.cfg.StallTimeout, time.Second)))
	io.CopyN(io.Discard, sc.nc, 1<<20)
}

// serveStream serves one request; false drops the connection.
func (sc *serverConn) serveStream(req tcpRequest) bool {
	if req.inc != 0 && req.inc != sc.s.inc {
		return sc.fail(errOtherIncarnation(sc.s.addr, req.inc))
	}
	ka := req.keepalive
	if ka == 0 {
		ka = sc.s.t.cfg.StallTimeout / 3
	}
	ka = min(max(ka, minKeepalive), maxKeepalive)
	if minChunk := sc.s.t.cfg.MinChunk; int64(req.chunk) < int64(minChunk) || req.chunk > maxChunk {
		return sc.writeFrame(frameError, errorPayload(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"chunk size %d outside %d..%d", req.chunk, minChunk, maxChunk))) == nil
	}
	if req.offset < 0 {
		return sc.writeFrame(frameError, errorPayload(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"offset %d", req.offset))) == nil
	}
	chunk := int(req.chunk)
	sc.arm(ka)
	defer sc.disarm()

	var r ObjectReader
	err, connErr := sc.waiting(func(ctx context.Context) (err error) {
		r, err = sc.s.src.OpenObject(ctx, req.id)
		return err
	})
	if connErr != nil {
		return false
	}
	if err == nil && r == nil {
		err = messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: source returned no reader", req.id)
	}
	if err != nil {
		return sc.fail(err)
	}
	defer r.Close()
	size := r.Size()
	if req.offset > size {
		return sc.fail(messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"offset %d outside object %q of %d bytes", req.offset, req.id, size))
	}
	var sb [8]byte
	binary.BigEndian.PutUint64(sb[:], uint64(size))
	if sc.writeFrame(frameSize, sb[:]) != nil {
		return false
	}
	for off := req.offset; off < size; {
		var b []byte
		err, connErr := sc.waiting(func(ctx context.Context) (err error) {
			b, err = r.ReadAt(ctx, off, chunk)
			return err
		})
		if connErr != nil {
			return false
		}
		if err == nil && len(b) == 0 {
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: empty read at %d of %d bytes", req.id, off, size)
		}
		if err != nil {
			if err == io.EOF {
				err = messages.Errorf(messages.ErrorCode_INTERNAL, "object %q ended at %d of %d bytes", req.id, off, size)
			}
			return sc.fail(err)
		}
		// Never more than the receiver asked for, nor past the size.
		b = b[:min(int64(len(b)), int64(chunk), size-off)]
		if req.paced {
			if err, connErr := sc.waiting(func(ctx context.Context) error { return sc.s.t.pacer.wait(ctx, len(b)) }); err != nil || connErr != nil {
				return false // stopping, or the receiver went away while we waited
			}
		}
		if err := sc.writeFrame(frameData, b); err != nil {
			return false
		}
		if req.paced {
			sc.s.t.pacer.sent(len(b))
		}
		off += int64(len(b))
	}
	return true
}

// fail ends a stream with an error frame; the connection stays usable.
func (sc *serverConn) fail(err error) bool {
	if sc.s.ctx.Err() != nil {
		return false // stopping: the close tells the receiver
	}
	return sc.writeFrame(frameError, errorPayload(err)) == nil
}

// arm starts the keepalive watchdog for a stream; disarm stops it. Its
// first tick comes after hangupDelay, to notice a parked stream early.
func (sc *serverConn) arm(interval time.Duration) {
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	sc.armed, sc.interval, sc.expired = true, interval, false
	sc.parkTried, sc.overParked = false, false
	sc.callCtx, sc.callStop = context.WithCancel(sc.s.ctx)
	first := min(hangupDelay, interval/2)
	if sc.watchdog == nil {
		sc.watchdog = time.AfterFunc(first, sc.tick)
	} else {
		sc.watchdog.Reset(first)
	}
}

func (sc *serverConn) disarm() {
	sc.wmu.Lock()
	sc.armed = false
	sc.watchdog.Stop()
	sc.callStop()
	stop := sc.stopHangup
	sc.stopHangup = nil
	sc.wmu.Unlock()
	if stop != nil {
		stop()
	}
	sc.unpark()
}

// stopWatchdog disarms a watchdog a panic left armed.
func (sc *serverConn) stopWatchdog() {
	sc.wmu.Lock()
	armed := sc.armed
	sc.wmu.Unlock()
	if armed {
		sc.disarm()
	}
}

func (sc *serverConn) tick() {
	defer func() { sc.s.t.recovered("in a stream's watchdog", sc.peer, recover()) }()
	sc.wmu.Lock()
	defer sc.wmu.Unlock()
	if !sc.armed {
		return
	}
	if !sc.since.IsZero() && !sc.parkTried {
		sc.parkTried = true
		if !sc.park() {
			sc.overParked = true
			sc.callStop()
		}
	}
	// Watched only while the call waits (waiting stops it): the stream's
	// frames, the last of which lets the receiver send its next request,
	// go out with nobody reading the connection.
	if !sc.since.IsZero() && !sc.overParked && sc.stopHangup == nil {
		stop := sc.callStop
		sc.stopHangup = sc.watchHangup(stop, nil)
	}
	if !sc.since.IsZero() && !sc.expired && time.Since(sc.since) >= sc.interval {
		sc.expired = true
		sc.callStop()
	}
	sc.watchdog.Reset(sc.interval / 2)
}

// waiting runs a Source call that may wait for a copy, sending a
// keepalive about every interval (the watchdog's) so that the receiver
// tells a waiting sender from a dead one. connErr reports a failed
// keepalive or a stopping server.
func (sc *serverConn) waiting(call func(context.Context) error) (err, connErr error) {
	for {
		sc.wmu.Lock()
		sc.since = time.Now()
		ctx := sc.callCtx
		sc.wmu.Unlock()
		err = call(ctx)
		sc.wmu.Lock()
		sc.since = time.Time{}
		expired, overParked, stop := sc.expired, sc.overParked, sc.stopHangup
		sc.stopHangup = nil
		if expired {
			sc.expired = false
			sc.callCtx, sc.callStop = context.WithCancel(sc.s.ctx)
		}
		sc.wmu.Unlock()
		if stop != nil && stop() {
			return nil, messages.Errorf(messages.ErrorCode_CANCELED, "the receiver hung up")
		}
		if sc.s.ctx.Err() != nil {
			return nil, sc.s.ctx.Err()
		}
		if overParked {
			sc.s.t.refuseFor(refusedParked, sc.key, sc.peer, sc.errTooManyParked())
			return sc.errTooManyParked(), nil
		}
		if err == nil || !expired {
			return err, nil
		}
		if err := sc.writeFrame(frameKeepalive, nil); err != nil {
			return nil, err
		}
		sc.s.t.keepalives.Add(1)
	}
}

// writeFrame writes one frame (after the preamble, if due) with the
// payload straight from the caller's slice. A peer that accepts no byte
// for StallTimeout fails it.
func (sc *serverConn) writeFrame(kind byte, payload []byte) error {
	h := sc.hbuf[:0]
	if sc.preamble {
		h = appendPreamble(h)
		sc.preamble = false
	}
	h = appendFrameHeader(h, kind, len(payload))
	sc.hbuf = h
	sc.vec[0], sc.vec[1] = h, payload
	bufs := net.Buffers(sc.vec[:])
	if len(payload) == 0 {
		bufs = bufs[:1]
	}
	err := writeAll(sc.nc, sc.raw, &bufs, sc.s.t.cfg.StallTimeout)
	sc.vec[1] = nil
	if err != nil {
		if isTimeout(err) {
			sc.s.t.logf("transport: data plane %s: %s stopped reading for %v; dropping connection", sc.s.addr, sc.peer, sc.s.t.cfg.StallTimeout)
		} else if sc.s.ctx.Err() == nil {
			sc.s.t.logf("transport: data plane %s: write to %s: %v; dropping connection", sc.s.addr, sc.peer, err)
		}
	}
	return err
}

// writeAll writes bufs, failing only when no byte moves for stall; on
// raw, nc's plain TCP socket, with raw system calls (canRawIO).
func writeAll(nc net.Conn, raw syscall.RawConn, bufs *net.Buffers, stall time.Duration) error {
	for len(*bufs) > 0 {
		nc.SetWriteDeadline(time.Now().Add(stall))
		var n int64
		var err error
		if raw != nil {
			n, err = rawWrite(raw, bufs)
		} else {
			n, err = bufs.WriteTo(nc)
		}
		if err != nil {
			if n > 0 && isTimeout(err) {
				continue // slow but moving
			}
			return err
		}
	}
	return nil
}

func isTimeout(err error) bool { return errors.Is(err, os.ErrDeadlineExceeded) }

// ---------------------------------------------------------------- client

type tcpConn struct {
	nc   net.Conn
	r    *connReader
	addr string
	idle time.Time
	// gone: ForgetPeer closed it under the exchange using it, because its
	// peer left the cluster. The exchange fails UNAVAILABLE, is not tried
	// again on a fresh connection, and the connection is never pooled.
	gone atomic.Bool
}

// write writes a request whole, within the write deadline set on c. On
// a plain TCP socket it is a raw writev(2): the runtime's system call
// entry would wake the process's sysmon thread, which then polls every
// 20 µs while the call waits for its answer (see canRawIO).
func (c *tcpConn) write(b []byte) error {
	if c.r.plain && canRawIO {
		bufs := net.Buffers{b}
		_, err := rawWrite(c.r.raw, &bufs)
		return err
	}
	_, err := c.nc.Write(b)
	return err
}

// getConn returns a pooled connection to addr or dials one.
func (t *TCP) getConn(ctx context.Context, addr string) (c *tcpConn, reused bool, err error) {
	var stale []*tcpConn
	defer func() {
		for _, s := range stale {
			s.nc.Close()
		}
	}()
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, false, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "transport closed")
	}
	for list := t.pool[addr]; len(list) > 0; list = t.pool[addr] {
		c = list[len(list)-1]
		list[len(list)-1] = nil
		t.pool[addr] = list[:len(list)-1]
		if time.Since(c.idle) > t.cfg.IdleTimeout/2 {
			stale = append(stale, c)
			continue
		}
		t.active[c] = struct{}{}
		t.mu.Unlock()
		return c, true, nil
	}
	t.mu.Unlock()

	hostPort, _, err := splitAddress(addr)
	if err != nil {
		return nil, false, err
	}
	d := net.Dialer{Timeout: t.cfg.DialTimeout, KeepAliveConfig: KeepAlive}
	nc, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, messages.AsError(ctx.Err())
		}
		return nil, false, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no data endpoint at %s: %v", addr, err)
	}
	if t.cfg.TLS != nil {
		tc := tls.Client(nc, certs.ForAddr(t.cfg.TLS, hostPort))
		hctx, cancel := context.WithTimeout(ctx, t.cfg.DialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			nc.Close()
			if ctx.Err() != nil {
				return nil, false, messages.AsError(ctx.Err())
			}
			return nil, false, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data port %s: TLS handshake failed (certificate not accepted?): %v", addr, err)
		}
		nc = tc
	}
	t.dials.Add(1)
	c = &tcpConn{nc: nc, r: newConnReader(nc), addr: addr}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		nc.Close()
		return nil, false, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "transport closed")
	}
	t.active[c] = struct{}{}
	t.mu.Unlock()
	return c, false, nil
}

// putConn returns a connection whose stream ended cleanly to the pool.
func (t *TCP) putConn(c *tcpConn) {
	if c.r.Buffered() > 0 { // bytes past the stream's end: not ours to keep
		t.logf("transport: data peer %s sent %d bytes past the stream's end; dropping connection", c.addr, c.r.Buffered())
		t.dropConn(c)
		return
	}
	t.mu.Lock()
	delete(t.active, c)
	if t.closed || c.gone.Load() || len(t.pool[c.addr]) >= t.cfg.MaxConnsPerPeer {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	c.idle = time.Now()
	t.pool[c.addr] = append(t.pool[c.addr], c)
	if t.reaper == nil {
		t.reaper = time.AfterFunc(t.reapEvery(), t.reap)
	}
	t.mu.Unlock()
}

// reapEvery is the reaper's period: a pooled connection is closed between
// IdleTimeout/2 and 3/4 of it after its last use, before the peer's
// server (of the same IdleTimeout) would close it.
func (t *TCP) reapEvery() time.Duration { return max(t.cfg.IdleTimeout/4, time.Millisecond) }

// reap closes the pooled connections idle longer than IdleTimeout/2 (as
// getConn would find them): those to a peer that left would otherwise
// stay open for as long as the transport. One timer for the whole pool,
// armed while it holds any connection, does it.
func (t *TCP) reap() {
	defer func() { t.recovered("reaping idle connections", "", recover()) }()
	now := time.Now()
	var stale []*tcpConn
	t.mu.Lock()
	for addr, list := range t.pool {
		keep := list[:0]
		for _, c := range list {
			if now.Sub(c.idle) > t.cfg.IdleTimeout/2 {
				stale = append(stale, c)
			} else {
				keep = append(keep, c)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(t.pool, addr)
		} else {
			t.pool[addr] = keep
		}
	}
	t.reaper = nil
	if len(t.pool) > 0 && !t.closed {
		t.reaper = time.AfterFunc(t.reapEvery(), t.reap)
	}
	t.mu.Unlock()
	t.reaped.Add(int64(len(stale)))
	for _, c := range stale {
		c.nc.Close()
	}
}

// ForgetPeer closes every connection to the peer at addr, a data
// address as the peer published it ("host:port#incarnation"; a plain
// "host:port" forgets every incarnation served there). A member calls it
// when the peer leaves its view (it failed, or its leave is over): the
// pooled connections would otherwise stay open until the reaper finds
// them idle, and a peer that left never closes them itself if its host
// is gone. The streams and control calls running to the peer end too,
// UNAVAILABLE: one whose peer died without a reset reaching this end (a
// host cut off, a process stopped) heard nothing until its deadline,
// where the member's failure detection knew in a fraction of it. Its
// caller asks again where its view now says (a Locate at the shard's
// new home, a fetch from another sender).
func (t *TCP) ForgetPeer(addr string) {
	stale := t.forgetPooled(addr)
	var running []*tcpConn
	t.mu.Lock()
	for c := range t.active {
		if forgets(addr, c.addr) {
			c.gone.Store(true)
			running = append(running, c)
		}
	}
	t.mu.Unlock()
	t.reaped.Add(int64(len(stale)))
	for _, c := range stale {
		c.nc.Close()
	}
	// Closed rather than given a past deadline, which the exchange's own
	// deadline could overwrite; the exchange that owns it drops it.
	for _, c := range running {
		c.nc.Close()
	}
}

// forgets reports whether ForgetPeer(addr) forgets a connection to
// connAddr.
func forgets(addr, connAddr string) bool {
	return connAddr == addr || (!strings.Contains(addr, "#") && HostPort(connAddr) == addr)
}

// forgetPooled takes the idle connections pooled for addr (see
// ForgetPeer) out of the pool and returns them, to be closed.
func (t *TCP) forgetPooled(addr string) []*tcpConn {
	var stale []*tcpConn
	t.mu.Lock()
	defer t.mu.Unlock()
	for a, list := range t.pool {
		if forgets(addr, a) {
			stale = append(stale, list...)
			delete(t.pool, a)
		}
	}
	return stale
}

// stalled closes the idle connections pooled for addr after a stream or
// control request to it got no byte for as long as its caller waits (a
// stall, or the caller's deadline). Those connections idled through the
// same outage, and one that the outage left half-open (a close or reset
// of the peer's end that never arrived) is not told from a live one
// until a request on it waits that long too: a fetch that locates the
// same sender again, as it does the last whole copy, would take the next
// pooled connection and stall again, once per connection pooled. Dialed
// afresh, the next attempt meets the peer as it is now.
func (t *TCP) stalled(addr string) {
	// Only the idle ones: the peer may be alive and slow, and the
	// exchanges running to it may yet be answered.
	stale := t.forgetPooled(addr)
	t.reaped.Add(int64(len(stale)))
	for _, c := range stale {
		c.nc.Close()
	}
}

func (t *TCP) dropConn(c *tcpConn) {
	t.mu.Lock()
	delete(t.active, c)
	t.mu.Unlock()
	c.nc.Close()
}

func (t *TCP) poolSize(addr string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pool[addr])
}

// Open implements Transport. A chunk size above 64 MiB is clamped to it.
func (t *TCP) Open(ctx context.Context, self, addr, id string, offset int64, chunk int) (Stream, error) {
	return t.open(ctx, addr, id, offset, chunk, false)
}

// OpenPaced implements PacedOpener: the peer sends the stream through
// its EgressPacer, at its TCPConfig.Pace.
func (t *TCP) OpenPaced(ctx context.Context, self, addr, id string, offset int64, chunk int) (Stream, error) {
	return t.open(ctx, addr, id, offset, chunk, true)
}

func (t *TCP) open(ctx context.Context, addr, id string, offset int64, chunk int, paced bool) (Stream, error) {
	if chunk <= 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "chunk size %d", chunk)
	}
	if offset < 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "offset %d of object %q", offset, id)
	}
	if len(id) > maxIDLen {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object id of %d bytes exceeds %d", len(id), maxIDLen)
	}
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	_, inc, err := splitAddress(addr)
	if err != nil {
		return nil, err
	}
	chunk = min(max(chunk, t.cfg.MinChunk), maxChunk)
	req := encodeRequest(id, offset, chunk, t.cfg.StallTimeout/3, paced, inc)
	for {
		c, reused, err := t.getConn(ctx, addr)
		if err != nil {
			return nil, err
		}
		s := &tcpStream{t: t, c: c, addr: addr, id: id, offset: offset, chunk: chunk}
		err = s.start(ctx, req)
		if err == nil {
			return s, nil
		}
		// A pooled connection the peer closed while idle fails before
		// answering anything: try the next one, or a fresh one.
		if reused && s.fatal != nil && s.got == 0 && ctx.Err() == nil &&
			errors.Is(err, messages.ErrUnavailable) {
			continue
		}
		return nil, err
	}
}

// tcpStream receives one object. Next and Close may run concurrently (a
// Close ends a blocked Next); Next calls must not.
type tcpStream struct {
	t      *TCP
	addr   string
	id     string
	offset int64
	chunk  int

	mu     sync.Mutex
	c      *tcpConn // nil once released to the pool or closed
	closed bool

	size      int64
	sizeKnown bool
	remaining int64
	fatal     error // the stream failed for good
	answered  bool  // the peer ended the stream with an error frame
	got       int   // response bytes received
	payload   int64 // data payload bytes received, partial chunks included
	buf       []byte

	// Frame parsing survives a Next that times out mid-frame.
	pre  [preambleLen]byte
	preN int
	hdr  [frameHeaderLen]byte
	hdrN int
	kind byte
	flen int
	fN   int
	into bool // the data frame being read goes to the caller's memory
	meta [2 + maxErrMsg]byte
	// full: the last data frame was a whole chunk, so the next one is
	// expected whole too, right behind its header (see ReadHeader).
	full bool
}

func (s *tcpStream) Size() int64 { return s.size }

var _ PayloadCounter = (*tcpStream)(nil)

// PayloadReceived implements PayloadCounter.
func (s *tcpStream) PayloadReceived() int64 { return s.payload }

// conn returns the stream's connection, or nil after Close.
func (s *tcpStream) conn() *tcpConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

// release hands the connection back: to the pool if the stream ended on
// a frame boundary, else closed.
func (s *tcpStream) release(reuse bool) {
	s.mu.Lock()
	c := s.c
	s.c = nil
	s.mu.Unlock()
	if c == nil {
		return
	}
	if reuse {
		s.t.putConn(c)
	} else {
		s.t.dropConn(c)
	}
}

func (s *tcpStream) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	// A drained stream already gave its connection back; one closed
	// before the end does not know what is still in flight.
	s.release(false)
}

// failWith makes err the stream's final error and drops the connection.
func (s *tcpStream) failWith(err error) error {
	s.fatal = err
	s.release(false)
	return err
}

func (s *tcpStream) protocolError(format string, args ...any) error {
	err := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data peer %s broke the protocol: "+format, append([]any{s.addr}, args...)...)
	s.t.logf("transport: %v; dropping connection", err)
	return s.failWith(err)
}

// watch makes a cancellation of ctx interrupt reads on c; the returned
// stop waits until that can no longer happen.
func watch(ctx context.Context, c *tcpConn) (stop func()) {
	if ctx.Done() == nil {
		return func() {}
	}
	fired := make(chan struct{})
	stopFn := context.AfterFunc(ctx, func() {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		close(fired)
	})
	return func() {
		if !stopFn() {
			<-fired
		}
	}
}

func (s *tcpStream) start(ctx context.Context, req []byte) error {
	c := s.c
	stop := watch(ctx, c)
	err := s.handshake(ctx, c, req)
	stop()
	if err != nil {
		// An error frame leaves the connection in step; a timeout
		// mid-handshake does not.
		s.release(s.fatal == nil && s.answered)
		return err
	}
	if s.remaining == 0 {
		s.release(true)
	}
	return nil
}

func (s *tcpStream) handshake(ctx context.Context, c *tcpConn, req []byte) error {
	dl := time.Now().Add(s.t.cfg.StallTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	c.nc.SetWriteDeadline(dl)
	if err := c.write(req); err != nil {
		if err := ctxErr(ctx); err != nil {
			return err
		}
		return s.failWith(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "request to data peer %s: %v", s.addr, err))
	}
	if err := s.fill(ctx, c, s.pre[:], &s.preN, false, 0); err != nil {
		return err
	}
	if !bytes.Equal(s.pre[:4], respMagic[:]) {
		return s.protocolError("not a data plane answer (magic %q)", s.pre[:4])
	}
	if v := binary.BigEndian.Uint16(s.pre[4:]); v != tcpVersion {
		return s.protocolError("it speaks data protocol version %d, this node speaks version %d", v, tcpVersion)
	}
	for {
		kind, p, err := s.readFrame(ctx, c, nil)
		if err != nil {
			return err
		}
		switch kind {
		case frameError:
			return s.errorFrame(p)
		case frameSize:
			size := int64(binary.BigEndian.Uint64(p))
			if size < 0 || size < s.offset {
				return s.protocolError("object %q has %d bytes, asked from offset %d", s.id, size, s.offset)
			}
			s.size, s.sizeKnown, s.remaining = size, true, size-s.offset
			return nil
		}
	}
}

func (s *tcpStream) errorFrame(p []byte) error {
	err, ok := decodeError(p, s.addr)
	if !ok {
		return s.protocolError("malformed error frame")
	}
	s.answered = true
	return err
}

// Next implements Stream. A Next that ends with ctx leaves the stream
// usable; any other error is final and drops the connection.
func (s *tcpStream) Next(ctx context.Context) ([]byte, error) {
	return s.next(ctx, nil)
}

// NextInto implements Stream: a data frame's payload is read from the
// socket straight into dst.
func (s *tcpStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	if want := min(int64(s.chunk), s.remaining); s.fatal == nil && int64(len(dst)) < want {
		return 0, messages.Errorf(messages.ErrorCode_INTERNAL, "stream of %q: a buffer of %d bytes for chunks of up to %d", s.id, len(dst), want)
	}
	p, err := s.next(ctx, dst)
	if err != nil {
		return 0, err
	}
	if &p[0] != &dst[0] {
		copy(dst, p) // a frame begun by Next: it finished in the stream's buffer
	}
	return len(p), nil
}

// next returns the next chunk, read into into when it is given.
func (s *tcpStream) next(ctx context.Context, into []byte) ([]byte, error) {
	if s.fatal != nil {
		return nil, s.fatal
	}
	if s.remaining == 0 {
		s.release(true)
		return nil, io.EOF
	}
	c := s.conn()
	if c == nil {
		return nil, messages.Errorf(messages.ErrorCode_CANCELED, "stream of %q from %s closed", s.id, s.addr)
	}
	stop := watch(ctx, c)
	kind, p, err := s.readFrame(ctx, c, into)
	stop() // before the connection can go back to the pool
	if err != nil {
		return nil, err
	}
	if kind == frameError {
		err := s.errorFrame(p)
		if s.fatal == nil {
			s.fatal = err
			s.release(true)
		}
		return nil, err
	}
	// readFrame checked: a data frame of 1..min(chunk, remaining) bytes.
	s.remaining -= int64(len(p))
	if s.remaining == 0 {
		s.release(true)
	}
	return p, nil
}

// readFrame returns the next frame other than a keepalive, resuming a
// frame that an earlier call left half read. A data frame that starts
// while into is given is read into it.
func (s *tcpStream) readFrame(ctx context.Context, c *tcpConn, into []byte) (byte, []byte, error) {
	for {
		if s.hdrN < frameHeaderLen || s.kind == 0 {
			expect := 0
			if s.full && s.sizeKnown {
				expect = int(min(int64(s.chunk), s.remaining))
			}
			if err := s.fill(ctx, c, s.hdr[:], &s.hdrN, false, expect); err != nil {
				return 0, nil, err
			}
			kind, n := s.hdr[0], binary.BigEndian.Uint32(s.hdr[1:])
			switch {
			case kind == frameKeepalive && n == 0:
				s.hdrN = 0
				continue
			case kind == frameSize && n == 8 && !s.sizeKnown:
			case kind == frameError && n >= 2 && n <= 2+maxErrMsg:
			case kind == frameData && s.sizeKnown && n >= 1 && int64(n) <= int64(s.chunk) && int64(n) <= s.remaining:
				s.into = into != nil
				if s.buf == nil && !s.into {
					s.buf = bufalloc.Make(int(min(int64(s.chunk), s.remaining)))
				}
			default:
				return 0, nil, s.protocolError("frame %q of %d bytes (chunk %d, %d bytes left, size known %v)",
					kind, n, s.chunk, s.remaining, s.sizeKnown)
			}
			s.kind, s.flen, s.fN = kind, int(n), 0
		}
		dst := s.meta[:]
		switch {
		case s.kind == frameData && s.into && into != nil:
			dst = into
		case s.kind == frameData && s.into:
			// Begun by NextInto, resumed by Next: the part already read
			// is in the caller's memory, which Next cannot reach.
			return 0, nil, s.failWith(messages.Errorf(messages.ErrorCode_INTERNAL, "stream of %q: a chunk begun by NextInto resumed by Next", s.id))
		case s.kind == frameData:
			if s.buf == nil {
				s.buf = bufalloc.Make(int(min(int64(s.chunk), s.remaining)))
			}
			dst = s.buf
		}
		if err := s.fill(ctx, c, dst[:s.flen], &s.fN, s.kind == frameData, 0); err != nil {
			return 0, nil, err
		}
		kind := s.kind
		if kind == frameData {
			s.full = s.flen == s.chunk
		}
		s.hdrN, s.kind = 0, 0
		return kind, dst[:s.flen], nil
	}
}

// headerWait bounds a header read's wait for a whole chunk behind the
// header (ReadHeader): what a sender sends instead (a keepalive, an
// error frame, a shorter frame) wakes no reader that waits for more, so
// the wait is cut short at this and the reader then takes what came: a
// failure behind a whole chunk is known at most this late. A member's
// chunk is about 5 ms of its measured bandwidth (the cluster's ChunkSize
// default), but some waits are longer (a relay's chunks come as its own
// sender's do), and a wait cut short costs a wake-up more. In 32 MiB
// broadcasts to 7 on the testbed (2 runs each), at 50 ms the members
// made 2,315-2,336 context switches per operation, at 200 ms
// 2,022-2,104, at 500 ms 1,923-2,050.
const headerWait = 200 * time.Millisecond

// fill reads p[*n:] from c, p being a data frame's payload if payload,
// else a frame header with expect payload bytes expected behind it
// (see connReader). Waiting ends with ctx (the stream stays usable, *n
// keeps the progress) or after StallTimeout without a byte (the stream
// fails).
func (s *tcpStream) fill(ctx context.Context, c *tcpConn, p []byte, n *int, payload bool, expect int) error {
	stall := s.t.cfg.StallTimeout
	stallAt := time.Now().Add(stall)
	moved := false // a byte came in this call
	for *n < len(p) {
		now := time.Now()
		dl := stallAt
		if expect > 0 && now.Add(headerWait).Before(dl) {
			dl = now.Add(headerWait)
		}
		if d, ok := ctx.Deadline(); ok {
			if !now.Before(d) {
				if !moved {
					s.t.stalled(s.addr)
				}
				return messages.AsError(context.DeadlineExceeded)
			}
			if d.Before(dl) {
				dl = d
			}
		}
		c.nc.SetReadDeadline(dl)
		if err := ctx.Err(); err != nil { // after setting the deadline: see watch
			return messages.AsError(err)
		}
		var m int
		var err error
		if payload {
			m, err = c.r.ReadPayload(p[*n:])
		} else {
			m, err = c.r.ReadHeader(p[*n:], expect)
		}
		*n += m
		s.got += m
		if payload {
			s.payload += int64(m)
		}
		if m > 0 {
			stallAt, moved = time.Now().Add(stall), true
		}
		if err == nil || (m > 0 && isTimeout(err)) {
			continue
		}
		if isTimeout(err) {
			if err := ctxErr(ctx); err != nil {
				if payload && errors.Is(err, messages.ErrTimeout) && c.r.Unread() {
					// Part of the payload came, less than the reader
					// asked the socket to wake it for (SO_RCVLOWAT): it
					// is taken now, so that the caller sees it arrive
					// (PayloadCounter) and tells a slow chunk from a
					// stalled one. The bytes are queued: the read does
					// not wait.
					c.nc.SetReadDeadline(time.Now().Add(headerWait))
					m, _ := c.r.ReadPayload(p[*n:])
					*n += m
					s.got += m
					s.payload += int64(m)
					moved = moved || m > 0
				}
				if !moved && errors.Is(err, messages.ErrTimeout) {
					s.t.stalled(s.addr)
				}
				return err
			}
			if expect > 0 {
				if c.r.Unread() {
					// Bytes came, fewer than the wait asked for: a sender
					// that paused after a keepalive, an error frame, or a
					// shorter frame. Read them as they are; they are
					// progress.
					expect, stallAt = 0, time.Now().Add(stall)
					continue
				}
				if time.Now().Before(stallAt) {
					continue // nothing yet, and no stall so far
				}
			}
			s.t.logf("transport: data peer %s sent nothing for %v; dropping connection", s.addr, stall)
			s.t.stalled(s.addr)
			return s.failWith(messages.Errorf(messages.ErrorCode_TIMEOUT,
				"data peer %s sent nothing for %v (object %q)", s.addr, stall, s.id))
		}
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			return s.failWith(messages.Errorf(messages.ErrorCode_CANCELED, "stream of %q from %s closed", s.id, s.addr))
		}
		if err == io.EOF {
			return s.failWith(messages.Errorf(messages.ErrorCode_UNAVAILABLE,
				"data peer %s closed the connection (object %q)", s.addr, s.id))
		}
		return s.failWith(messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"data peer %s: %v (object %q)", s.addr, err, s.id))
	}
	return nil
}

// ctxErr is ctx's error, or TIMEOUT once its deadline passed (the
// connection's deadline timer may fire before the context's).
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return messages.AsError(err)
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return messages.AsError(context.DeadlineExceeded)
	}
	return nil
}
