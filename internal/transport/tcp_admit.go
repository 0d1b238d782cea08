package transport

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Admission of served connections. A connection is pending from its
// accept until its TLS handshake and its first request are done, and
// established afterwards. Pending connections live in a small budget of
// their own, total and per source, and have HandshakeTimeout to become
// established: silent or half-open connections, however many, cannot
// take the slots that peers with requests need. Established connections
// and the requests they park are bounded per source, so that one peer
// cannot hold all of MaxServerConns.
//
// A source is the remote IP address; under TLS an established
// connection's source is its IP address and its verified client
// certificate's identity, so that members sharing a host but not a
// certificate are told apart.

// refusal is why a connection or a request was refused.
type refusal int

const (
	refusedTotal         refusal = iota // MaxServerConns
	refusedPending                      // MaxPendingConns
	refusedSourcePending                // MaxPendingPerSource
	refusedSource                       // MaxConnsPerSource
	refusedParked                       // MaxParkedPerSource
	refusedTimeout                      // handshake or first request later than HandshakeTimeout
	refusedHandshake                    // TLS handshake failed
	numRefusals
)

// TCPStats counts what a TCP transport's served addresses refused and
// survived, since NewTCP. Every field only grows: a member exports them
// as counters.
type TCPStats struct {
	// PanicsRecovered counts panics recovered while serving a connection
	// (a bug; each closed its connection and was logged with its stack).
	PanicsRecovered int64
	// RefusedTotal counts connections closed at accept because
	// MaxServerConns connections were open.
	RefusedTotal int64
	// RefusedPending counts connections closed at accept because
	// MaxPendingConns connections were waiting for their handshake or
	// first request.
	RefusedPending int64
	// RefusedSourcePending counts connections closed at accept because
	// MaxPendingPerSource connections from the same address were waiting
	// for their handshake or first request.
	RefusedSourcePending int64
	// RefusedSource counts connections refused at their first request
	// (with a RESOURCE_EXHAUSTED error frame) because MaxConnsPerSource
	// connections of the same source were established.
	RefusedSource int64
	// RefusedParked counts requests answered RESOURCE_EXHAUSTED instead of
	// waiting because MaxParkedPerSource requests of the same source
	// were waiting already.
	RefusedParked int64
	// HandshakeTimeouts counts connections closed because their TLS
	// handshake and first request took longer than HandshakeTimeout.
	HandshakeTimeouts int64
	// HandshakeFailures counts connections whose TLS handshake failed
	// (no or an unverifiable client certificate, not TLS at all).
	HandshakeFailures int64
	// IdleReaped counts pooled client connections closed because they
	// were idle too long, their peer was forgotten (ForgetPeer), or a
	// stream or control request to their peer stalled.
	IdleReaped int64
}

// Stats returns the transport's counters.
func (t *TCP) Stats() TCPStats {
	r := &t.refusals
	return TCPStats{
		PanicsRecovered:      t.panics.Load(),
		RefusedTotal:         r[refusedTotal].Load(),
		RefusedPending:       r[refusedPending].Load(),
		RefusedSourcePending: r[refusedSourcePending].Load(),
		RefusedSource:        r[refusedSource].Load(),
		RefusedParked:        r[refusedParked].Load(),
		HandshakeTimeouts:    r[refusedTimeout].Load(),
		HandshakeFailures:    r[refusedHandshake].Load(),
		IdleReaped:           t.reaped.Load(),
	}
}

// sourceCount is what one source holds at a served address.
type sourceCount struct {
	pending, established, parked int
}

// sourceIP is a remote address's host, or the whole of it if it has no
// port.
func sourceIP(a net.Addr) string {
	s := a.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}

// certIdentity names a verified client certificate: its subject's
// CommonName, else a hash of its public key.
func certIdentity(cs tls.ConnectionState) string {
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	leaf := cs.PeerCertificates[0]
	if leaf.Subject.CommonName != "" {
		return "cn=" + leaf.Subject.CommonName
	}
	sum := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	return "spki=" + hex.EncodeToString(sum[:8])
}

func (s *tcpServer) source(key string) *sourceCount {
	c := s.sources[key]
	if c == nil {
		c = &sourceCount{}
		s.sources[key] = c
	}
	return c
}

// forgetSource drops key's entry once it holds nothing, so that the map
// stays as large as the sources connected now.
func (s *tcpServer) forgetSource(key string, c *sourceCount) {
	if c.pending == 0 && c.established == 0 && c.parked == 0 {
		delete(s.sources, key)
	}
}

// admitLocked takes a pending slot for a new connection from ip, or says
// why not. s.mu is held.
func (s *tcpServer) admitLocked(nc net.Conn, ip string) (refusal, bool) {
	cfg := &s.t.cfg
	switch {
	case len(s.conns) >= cfg.MaxServerConns:
		return refusedTotal, false
	case s.pending >= cfg.MaxPendingConns:
		return refusedPending, false
	}
	c := s.source(ip)
	if c.pending >= cfg.MaxPendingPerSource {
		return refusedSourcePending, false
	}
	c.pending++
	s.pending++
	s.conns[nc] = struct{}{}
	return 0, true
}

// establish moves sc from the pending budget to its source's
// established connections once its first request came; false if its
// source holds MaxConnsPerSource already.
func (sc *serverConn) establish() bool {
	key := sc.ip
	if tc, ok := sc.nc.(*tls.Conn); ok {
		if id := certIdentity(tc.ConnectionState()); id != "" {
			key = sc.ip + "/" + id
		}
	}
	s := sc.s
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.source(key)
	if c.established >= s.t.cfg.MaxConnsPerSource {
		s.forgetSource(key, c)
		return false
	}
	c.established++
	p := s.sources[sc.ip]
	p.pending--
	s.pending--
	s.forgetSource(sc.ip, p)
	sc.key, sc.established = key, true
	return true
}

// release gives back what sc holds in the budgets; serveConn calls it
// as the connection ends.
func (sc *serverConn) release() {
	s := sc.s
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, sc.accepted)
	// A control request's watch may still try to park after a panic
	// ended the connection: it must find nothing to count.
	sc.released = true
	if !sc.established {
		c := s.sources[sc.ip]
		c.pending--
		s.pending--
		s.forgetSource(sc.ip, c)
		return
	}
	c := s.sources[sc.key]
	c.established--
	if sc.parked {
		c.parked--
		sc.parked = false
	}
	s.forgetSource(sc.key, c)
}

// park counts sc's request as parked (waiting for its Source for more
// than hangupDelay); false if its source has MaxParkedPerSource parked
// already, and the request must be refused instead.
func (sc *serverConn) park() bool {
	s := sc.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc.parked || !sc.established || sc.released {
		return true
	}
	c := s.sources[sc.key]
	if c.parked >= s.t.cfg.MaxParkedPerSource {
		return false
	}
	c.parked++
	sc.parked = true
	return true
}

// unpark ends what park counted.
func (sc *serverConn) unpark() {
	s := sc.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc.parked {
		s.sources[sc.key].parked--
		sc.parked = false
	}
}

// errTooManyParked answers a request refused by MaxParkedPerSource.
func (sc *serverConn) errTooManyParked() error {
	return messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
		"data plane %s: %d requests from %s are waiting already (MaxParkedPerSource); try again later", sc.s.addr, sc.s.t.cfg.MaxParkedPerSource, sc.key)
}

// refuseFor counts a refusal of reason and logs it, rate limited,
// through Limited (a failed TLS handshake through Refused).
func (t *TCP) refuseFor(reason refusal, source, peer string, err error) {
	t.refusals[reason].Add(1)
	if reason == refusedHandshake {
		// A line of its own per source: a source's handshake failures
		// and its limits go to different hooks, and one must not hide
		// the other.
		t.limitLog("handshake", source, peer, err, t.cfg.Refused)
		return
	}
	t.limitLog("limit", source, peer, err, t.cfg.Limited)
}

// refusalLogEvery is how often at most a source's refusals are logged:
// a flood of connections must not become a flood of log lines. Those in
// between are counted, and the next line says how many there were.
const refusalLogEvery = 5 * time.Second

// maxRefusalSources bounds the sources whose last refusal line is
// remembered; past it, the refusals of new sources share one line.
const maxRefusalSources = 4096

type refusalLog struct {
	mu sync.Mutex
	by map[string]*refusalLine
}

type refusalLine struct {
	last       time.Time
	suppressed int
}

// limitLog logs a refusal through sink (if nil, Log), at most once per
// refusalLogEvery per class and source.
func (t *TCP) limitLog(class, source, peer string, err error, sink func(peer string, err error)) {
	now := time.Now()
	key := class + " " + source
	l := &t.rlog
	l.mu.Lock()
	if l.by == nil {
		l.by = map[string]*refusalLine{}
	}
	line := l.by[key]
	if line == nil && len(l.by) >= maxRefusalSources {
		for k, v := range l.by {
			if now.Sub(v.last) >= refusalLogEvery && v.suppressed == 0 {
				delete(l.by, k)
			}
		}
		if len(l.by) >= maxRefusalSources {
			source = "other sources"
			key = class + " " + source
			line = l.by[key]
		}
	}
	if line != nil && now.Sub(line.last) < refusalLogEvery {
		line.suppressed++
		l.mu.Unlock()
		return
	}
	if line == nil {
		line = &refusalLine{}
		l.by[key] = line
	}
	n := line.suppressed
	line.last, line.suppressed = now, 0
	l.mu.Unlock()
	if n > 0 {
		err = fmt.Errorf("%w (and %d more refused from %s since the last such line)", err, n, source)
	}
	if sink != nil {
		sink(peer, err)
		return
	}
	t.logf("transport: refused %s: %v", peer, err)
}

// recovered handles a panic recovered while serving peer: counted,
// logged with its stack. It must be called with recover()'s value.
func (t *TCP) recovered(where, peer string, v any) {
	if v == nil {
		return
	}
	t.panics.Add(1)
	stack := debug.Stack()
	t.logf("transport: panic %s (peer %s): %v\n%s", where, peer, v, stack)
	host := peer
	if h, _, err := net.SplitHostPort(peer); err == nil {
		host = h
	}
	t.limitLog("panic", host, peer, fmt.Errorf("panic %s: %v (connection closed; a bug: see the debug log for the stack)", where, v), t.cfg.Limited)
}
