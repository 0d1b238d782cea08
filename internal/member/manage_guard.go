package member

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/labstack/echo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
)

// The manage port's admission. A connection is pending from its accept
// until its first request header is read (its TLS handshake included),
// then served until it closes. Slots were taken at accept, so one address
// that opened manageConns connections and said nothing held every slot
// until the header timeout freed them, the members' health checks of
// this one timed out meanwhile, and missed health checks expel a member.
// Now a source (a remote IP) holds at most manageSourceConns connections
// of the manageConns, at most managePendingPerSource of them pending, and
// a pending connection has manageHeaderDeadline to become a request.
// Connections beyond a limit are closed at once, counted
// (hoplite_manage_refused_total) and logged at warn, one line per source
// per refusalLogEvery.
const (
	// managePendingPerSource bounds a source's connections that have not
	// sent a request header yet. A member's health checks and seed
	// exchanges open a few at once per member; members sharing a host
	// share its address, and a host of 8 members joining at once stays
	// well within it.
	managePendingPerSource = 32
	// manageSourceConns bounds a source's connections, pending or served:
	// a peer member keeps up to 4 health check connections alive and one
	// for the seed exchange, so 16 members on one host fit, with room for
	// scrapes and live view feeds; one address can take a quarter of
	// manageConns at most.
	manageSourceConns = 128
	// manageHeaderDeadline is how long a connection may take to finish its
	// TLS handshake and send its request header (each request's header on
	// a kept-alive connection too). A health check sends it at once; the
	// former 10 s let a silent connection hold its slot for 10 s.
	manageHeaderDeadline = 5 * time.Second
	// refusalLogEvery spaces the warnings about one source.
	refusalLogEvery = 5 * time.Second
	// maxLoggedSources bounds the sources whose last warning is
	// remembered: past it, further refusals are only counted.
	maxLoggedSources = 1024
)

// Reasons of hoplite_manage_refused_total.
const (
	refusedPending = "pending_per_source" // the source's pending connections are at managePendingPerSource
	refusedSource  = "per_source"         // the source holds manageSourceConns connections
	refusedTotal   = "total"              // the port holds manageConns connections
	// refusedIdentity: under TLS, the source's connections with this
	// client certificate are at the bound per source (closed at their
	// first request).
	refusedIdentity = "per_source_certificate"
	// refusedExchange: a seed exchange over its source's rate
	// (exchangeRate), answered 429 rather than closed.
	refusedExchange = "seed_exchange_rate"
)

// manageMetrics count what the manage port turned away. They exist
// before the member's registry (the manage port listens first), which
// registers them (collectors).
type manageMetrics struct {
	refused   *prometheus.CounterVec // connections, by reason
	panics    prometheus.Counter     // handlers that panicked
	seeds     *prometheus.CounterVec // seeds from the exchange refused, by reason
	forgotten prometheus.Counter     // learned seeds forgotten
}

func newManageMetrics() *manageMetrics {
	return &manageMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_manage_refused_total",
			Help: "Connections to the manage port closed at accept, by the limit they met: pending_per_source, per_source, total; under TLS at their first request, per_source_certificate; and seed exchanges answered 429 over their source's rate: seed_exchange_rate."},
			[]string{"reason"}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_manage_handler_panics_total",
			Help: "Manage port requests whose handler panicked (answered 500; the member goes on)."}),
		seeds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_seeds_refused_total",
			Help: "Seeds from the seed exchange that this member did not add, by reason: invalid (not host:port), full (it polls as many learned seeds as it may)."},
			[]string{"reason"}),
		forgotten: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_seeds_forgotten_total",
			Help: "Seeds learned from the seed exchange that this member stopped polling: they had not answered a health check for long."}),
	}
}

func (mm *manageMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{mm.refused, mm.panics, mm.seeds, mm.forgotten}
}

func (mm *manageMetrics) refuse(reason string) {
	if mm != nil {
		mm.refused.WithLabelValues(reason).Inc()
	}
}

func (mm *manageMetrics) panicked() {
	if mm != nil {
		mm.panics.Inc()
	}
}

func (mm *manageMetrics) seedsRefused(reason string, n int) {
	if mm != nil && n > 0 {
		mm.seeds.WithLabelValues(reason).Add(float64(n))
	}
}

func (mm *manageMetrics) seedsForgotten(n int) {
	if mm != nil && n > 0 {
		mm.forgotten.Add(float64(n))
	}
}

// logLimiter lets one log line about a key through per interval and
// says how many it held back since.
type logLimiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]*limitedLine
}

type limitedLine struct {
	at         time.Time
	suppressed int
}

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, now: time.Now, last: map[string]*limitedLine{}}
}

// allow reports whether a line about key may be logged now, and how many
// were held back since the last one that was.
func (l *logLimiter) allow(key string) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if e := l.last[key]; e != nil {
		if now.Sub(e.at) < l.every {
			e.suppressed++
			return false, 0
		}
		n := e.suppressed
		*e = limitedLine{at: now}
		return true, n
	}
	if len(l.last) >= maxLoggedSources {
		for k, e := range l.last {
			if now.Sub(e.at) >= l.every {
				delete(l.last, k)
			}
		}
		if len(l.last) >= maxLoggedSources {
			return false, 0 // the metrics still count it
		}
	}
	l.last[key] = &limitedLine{at: now}
	return true, 0
}

// rateLimiter is a token bucket per source: burst requests at once, then
// rate a second. It remembers at most maxLoggedSources sources (past
// that, full buckets are dropped first; if none is, the source is
// refused until one is).
type rateLimiter struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateLimiter(rate float64, burst int) *rateLimiter {
	return &rateLimiter{rate: rate, burst: float64(burst), now: time.Now, buckets: map[netip.Addr]*bucket{}}
}

// allow takes a token of src's bucket, if it has one.
func (l *rateLimiter) allow(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.buckets[src]
	if b == nil {
		if len(l.buckets) >= maxLoggedSources {
			for k, o := range l.buckets {
				if o.tokens+now.Sub(o.at).Seconds()*l.rate >= l.burst {
					delete(l.buckets, k)
				}
			}
			if len(l.buckets) >= maxLoggedSources {
				return false
			}
		}
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[src] = b
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// manageLimits are a manageGuard's bounds.
type manageLimits struct {
	Total            int           // connections at once
	PerSource        int           // connections of one source, pending or served
	PendingPerSource int           // connections of one source before their first request header
	HeaderDeadline   time.Duration // from accept to the first request header
	// MembersAt, if set, is how many members this member knows at an
	// address: a source that hosts more members than PerSource allows
	// for (perMemberConns each) gets their share instead, so that a
	// cluster of many members on one host is not refused by its own
	// health checks.
	MembersAt func(netip.Addr) int
}

// perMemberConns is what one peer member holds at the manage port at
// most: up to 4 health check connections and one seed exchange, with
// room for a reconnect.
const perMemberConns = 8

// perMemberPending is what one peer member may have pending at the
// manage port at once: while this member stalls (a long page-faulting
// warm-up, a starved process), every check, indirect probe and roster
// pull of a monitor waits in the accept queue, and the next round's
// open beside them. A fixed pending budget per source reset the checks
// of the members sharing a host at such a member (48 on one host), and
// they expelled it.
const perMemberPending = 4

// perSource is src's bound on connections.
func (l manageLimits) perSource(src netip.Addr) int {
	if l.MembersAt == nil {
		return l.PerSource
	}
	return max(l.PerSource, perMemberConns*l.MembersAt(src))
}

// pendingPerSource is src's bound on pending connections.
func (l manageLimits) pendingPerSource(src netip.Addr) int {
	if l.MembersAt == nil {
		return l.PendingPerSource
	}
	return max(l.PendingPerSource, perMemberPending*l.MembersAt(src))
}

// defaultManageLimits are the manage port's.
var defaultManageLimits = manageLimits{Total: manageConns, PerSource: manageSourceConns,
	PendingPerSource: managePendingPerSource, HeaderDeadline: manageHeaderDeadline}

// manageGuard admits the manage port's connections (see manageConns).
type manageGuard struct {
	limits  manageLimits
	metrics *manageMetrics
	log     *logrus.Entry
	warn    *logLimiter

	mu      sync.Mutex
	total   int
	sources map[netip.Addr]*sourceConns // only sources holding connections
	// identities counts served TLS connections by source and certificate
	// ("ip|spki-hash"): under TLS a source is both, so that a certificate
	// holder on a members' host cannot take the slots of the members'
	// own certificate there.
	identities map[string]int
}

// sourceConns are a source's connections: pending, served without a
// client certificate (plaintext), and served under TLS, which count
// apart, by certificate (manageGuard.identities).
type sourceConns struct{ pending, served, servedTLS int }

func newManageGuard(limits manageLimits, metrics *manageMetrics, log *logrus.Entry) *manageGuard {
	return &manageGuard{limits: limits, metrics: metrics, log: log, warn: newLogLimiter(refusalLogEvery),
		sources: map[netip.Addr]*sourceConns{}, identities: map[string]int{}}
}

// listen wraps the port's listener. Its connections' state changes
// must reach connState (the http.Server's ConnState).
func (g *manageGuard) listen(ln net.Listener) net.Listener {
	return &guardListener{Listener: ln, g: g}
}

// sourceOf is a connection's source: its remote IP.
func sourceOf(a net.Addr) netip.Addr {
	if t, ok := a.(*net.TCPAddr); ok {
		if ap := t.AddrPort(); ap.IsValid() {
			return ap.Addr().Unmap()
		}
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{} // one source for every address it cannot tell
	}
	return ap.Addr().Unmap()
}

// admit takes a pending slot for src, or says which limit it met.
func (g *manageGuard) admit(src netip.Addr) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	switch {
	case s != nil && s.pending >= g.limits.pendingPerSource(src):
		return refusedPending
	case s != nil && s.pending+s.served >= g.limits.perSource(src):
		// Served TLS connections count by certificate, at promote: the
		// certificate is not known before the handshake.
		return refusedSource
	case g.total >= g.limits.Total:
		return refusedTotal
	}
	if s == nil {
		s = &sourceConns{}
		g.sources[src] = s
	}
	s.pending++
	g.total++
	return ""
}

// promote turns src's pending slot into a served one; identity is the
// client certificate's ("" without TLS). false: that source and
// certificate hold as many served connections as a source may, and the
// slot stays pending (the caller closes the connection).
func (g *manageGuard) promote(src netip.Addr, identity string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	if s == nil || s.pending == 0 {
		return true
	}
	if identity == "" {
		s.pending--
		s.served++
		return true
	}
	key := src.String() + "|" + identity
	if g.identities[key] >= g.limits.perSource(src) {
		return false
	}
	g.identities[key]++
	s.pending--
	s.servedTLS++
	return true
}

// release frees src's slot (served as identity, if not pending).
func (g *manageGuard) release(src netip.Addr, pending bool, identity string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	if s == nil {
		return
	}
	switch {
	case pending:
		s.pending--
	case identity == "":
		s.served--
	default:
		s.servedTLS--
		key := src.String() + "|" + identity
		if g.identities[key]--; g.identities[key] <= 0 {
			delete(g.identities, key)
		}
	}
	g.total--
	if s.pending+s.served+s.servedTLS == 0 {
		delete(g.sources, src)
	}
}

// held is what src holds now (tests).
func (g *manageGuard) held(src netip.Addr) (pending, served int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if s := g.sources[src]; s != nil {
		return s.pending, s.served + s.servedTLS
	}
	return 0, 0
}

func (g *manageGuard) refuse(src netip.Addr, reason string) {
	g.metrics.refuse(reason)
	if g.log == nil {
		return
	}
	if ok, n := g.warn.allow(src.String()); ok {
		g.log.WithFields(logrus.Fields{"source": src.String(), "reason": reason, "suppressed": n}).
			Warn("manage port: refused a connection over its source's (or the port's) limit")
	}
}

// connState follows the HTTP server's connections: the first request
// read makes a pending connection served.
func (g *manageGuard) connState(c net.Conn, s http.ConnState) {
	gc := guardedOf(c)
	if gc == nil {
		return
	}
	switch s {
	case http.StateActive:
		if !gc.promote(certIdentity(c)) {
			g.refuse(gc.src, refusedIdentity)
			_ = c.Close()
		}
	case http.StateClosed:
		gc.release()
	}
}

// certIdentity names c's verified client certificate (a hash of its
// public key), "" without TLS or a certificate.
func certIdentity(c net.Conn) string {
	tc, ok := c.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return ""
	}
	st := tc.ConnectionState()
	if len(st.PeerCertificates) == 0 {
		return ""
	}
	h := sha256.Sum256(st.PeerCertificates[0].RawSubjectPublicKeyInfo)
	return hex.EncodeToString(h[:8])
}

// guardedOf finds the guardedConn under c (a TLS connection wraps it).
func guardedOf(c net.Conn) *guardedConn {
	for range 4 {
		switch v := c.(type) {
		case *guardedConn:
			return v
		case interface{ NetConn() net.Conn }:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}

type guardListener struct {
	net.Listener
	g *manageGuard
}

// Accept returns the next connection within the limits, closing the
// others as they come: they never wait for a slot.
func (l *guardListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(nc.RemoteAddr())
		if reason := l.g.admit(src); reason != "" {
			l.g.refuse(src, reason)
			if t, ok := nc.(*net.TCPConn); ok {
				_ = t.SetLinger(0) // a reset: no TIME_WAIT kept for a refused client
			}
			_ = nc.Close()
			continue
		}
		// The TLS handshake's writes too: the server sets the read
		// deadline itself (ReadHeaderTimeout), and the write deadline
		// once the request is read.
		_ = nc.SetDeadline(time.Now().Add(l.g.limits.HeaderDeadline))
		return &guardedConn{Conn: nc, g: l.g, src: src}, nil
	}
}

// guardedConn holds a slot until it closes.
type guardedConn struct {
	net.Conn
	g   *manageGuard
	src netip.Addr

	mu       sync.Mutex
	served   bool
	identity string // the client certificate's, once served
	released bool
}

// promote makes the connection served as identity; false if its source
// and certificate may hold no more.
func (c *guardedConn) promote(identity string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.served || c.released {
		return true
	}
	if !c.g.promote(c.src, identity) {
		return false
	}
	c.served, c.identity = true, identity
	return true
}

func (c *guardedConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.released {
		return
	}
	c.released = true
	c.g.release(c.src, !c.served, c.identity)
}

// Close releases the slot.
func (c *guardedConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// newManageEcho is the manage port's HTTP server on ln: guarded (ln is
// wrapped by g; with tlsCfg, its connections speak TLS inside the
// guard's), and recovering its handlers' panics.
func newManageEcho(ln net.Listener, g *manageGuard, wrapTLS func(net.Listener) net.Listener, log *logrus.Entry) *echo.Echo {
	ln = g.listen(ln)
	if wrapTLS != nil {
		ln = wrapTLS(ln)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard)
	e.Listener = ln
	e.Server.ConnState = g.connState
	e.Server.ReadHeaderTimeout = g.limits.HeaderDeadline
	e.Server.ReadTimeout = 2 * handshakeTimeout
	e.Server.WriteTimeout = 2 * time.Minute // a 30 s CPU profile fits
	e.Server.IdleTimeout = time.Minute
	e.Use(recoverManage(g.metrics, log))
	return e
}

// recoverManage answers 500 for a handler that panicked, counts and logs
// it: net/http would recover it too, but silently (echo's logger is
// discarded) and by dropping the connection.
func recoverManage(mm *manageMetrics, log *logrus.Entry) echo.MiddlewareFunc {
	warn := newLogLimiter(refusalLogEvery)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) (err error) {
			defer func() {
				r := recover()
				if r == nil {
					return
				}
				if e, ok := r.(error); ok && errors.Is(e, http.ErrAbortHandler) {
					panic(r) // net/http's own way to abort a response
				}
				mm.panicked()
				if ok, n := warn.allow("panic"); ok && log != nil {
					stack := make([]byte, 8<<10)
					stack = stack[:runtime.Stack(stack, false)]
					log.WithFields(logrus.Fields{"path": c.Request().URL.Path, "panic": fmt.Sprint(r),
						"stack": string(stack), "suppressed": n}).Error("manage port: a handler panicked (answered 500)")
				}
				err = echo.NewHTTPError(http.StatusInternalServerError, "internal error")
			}()
			return next(c)
		}
	}
}
