package member

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/certs"
)

// dialFrom opens a TCP connection to addr from the loopback address src
// (127.0.0.2: another source than the members' 127.0.0.1).
func dialFrom(ctx context.Context, src, addr string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	return d.DialContext(ctx, "tcp", addr)
}

// closedByServer waits (up to a generous bound) for the server to close
// c; false if it did not.
func closedByServer(c net.Conn, bound time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(bound))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// TestManagePortSilentSourceKeepsHealth: one address (127.0.0.2) keeps
// 512 silent connections open to a member's manage port, reopening those
// that are closed. The member's /_health keeps answering new connections
// from its peers' address, and neither member of the pair is expelled.
// The manage port's 512 slots were taken at accept: the flood held them
// all until the 10 s header timeout, and health checks waited meanwhile.
func TestManagePortSilentSourceKeepsHealth(t *testing.T) {
	a, b := joinPair(t, testLogger(t, logrus.InfoLevel), nil)
	target := net.JoinHostPort("127.0.0.1", fmt.Sprint(a.cfg.ManagePort))

	ctx, cancel := context.WithCancel(context.Background())
	var flood sync.WaitGroup
	t.Cleanup(func() { cancel(); flood.Wait() })
	var dialed atomic.Int64
	for range 512 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for ctx.Err() == nil {
				c, err := dialFrom(ctx, "127.0.0.2", target)
				if err == nil {
					dialed.Add(1)
					stop := context.AfterFunc(ctx, func() { _ = c.Close() })
					_, _ = c.Read(make([]byte, 1)) // silent until the member closes it
					stop()
					_ = c.Close()
				}
				select { // a closed connection is reopened, not in a tight loop
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}()
	}
	eventually(t, 30*time.Second, "the flood opened 512 connections", func() bool { return dialed.Load() >= 512 })

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	health := func() error {
		hctx, hcancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer hcancel()
		req, _ := http.NewRequestWithContext(hctx, http.MethodGet, "http://"+target+"/_health", nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %s", resp.Status)
		}
		return nil
	}
	// Past the header deadline: the flood's first pending connections
	// have been closed and reopened.
	for end := time.Now().Add(manageHeaderDeadline + 2*time.Second); time.Now().Before(end); {
		if err := health(); err != nil {
			t.Fatalf("/_health from the peers' address while 127.0.0.2 floods the manage port: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := testutil.ToFloat64(a.manage.refused.WithLabelValues(refusedPending)); n == 0 {
		t.Fatal("no connection of the flood was refused")
	}
	for _, m := range []*Member{a, b} {
		if n := testutil.ToFloat64(m.metrics.failures); n != 0 {
			t.Fatalf("%s published %v member failures during the flood", m.ID(), n)
		}
		if got := len(m.Members()); got != 2 {
			t.Fatalf("%s sees %d members during the flood, want 2", m.ID(), got)
		}
	}
}

// guardedServer serves a manage port with the given limits on 127.0.0.1;
// /ok answers 200, /panic panics.
func guardedServer(t *testing.T, limits manageLimits) (addr string, g *manageGuard, mm *manageMetrics) {
	t.Helper()
	return guardedServerTLS(t, limits, nil)
}

// guardedServerTLS is guardedServer over mutual TLS (tlsCfg) as members
// serve it.
func guardedServerTLS(t *testing.T, limits manageLimits, tlsCfg *tls.Config) (addr string, g *manageGuard, mm *manageMetrics) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mm = newManageMetrics()
	g = newManageGuard(limits, mm, logrus.NewEntry(testLogger(t, logrus.DebugLevel)))
	var wrapTLS func(net.Listener) net.Listener
	if tlsCfg != nil {
		wrapTLS = func(ln net.Listener) net.Listener {
			return &tlsManageListener{Listener: ln, cfg: tlsCfg, log: logrus.NewEntry(testLogger(t, logrus.DebugLevel))}
		}
	}
	e := newManageEcho(ln, g, wrapTLS, logrus.NewEntry(testLogger(t, logrus.DebugLevel)))
	e.GET("/ok", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/panic", func(c echo.Context) error { panic("a handler's bug") })
	done := make(chan struct{})
	go func() { defer close(done); _ = e.StartServer(e.Server) }()
	t.Cleanup(func() { _ = e.Close(); <-done })
	return ln.Addr().String(), g, mm
}

// request sends a GET of path on c and reads the status line.
func request(t *testing.T, c net.Conn, path string) string {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetDeadline(time.Time{})
	return resp.Status
}

// TestManageGuardLimits: a source's pending connections, a source's
// connections and the port's connections are each bounded; a connection
// over a bound is closed at once and counted; closing connections frees
// their slots.
func TestManageGuardLimits(t *testing.T) {
	// A long header deadline: every close seen here is a refusal.
	addr, g, mm := guardedServer(t, manageLimits{Total: 6, PerSource: 4, PendingPerSource: 2, HeaderDeadline: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dial := func(src string) net.Conn {
		t.Helper()
		c, err := dialFrom(ctx, src, addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	// A refused connection may be reset before its dial returns.
	refused := func(src string) bool {
		t.Helper()
		c, err := dialFrom(ctx, src, addr)
		if err != nil {
			return !errors.Is(err, context.DeadlineExceeded)
		}
		defer c.Close()
		return closedByServer(c, 10*time.Second)
	}
	two, three, four := netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.3"), netip.MustParseAddr("127.0.0.4")
	var silent []net.Conn
	for range 2 {
		silent = append(silent, dial("127.0.0.2"))
	}
	eventually(t, 10*time.Second, "127.0.0.2 holds 2 pending connections", func() bool { p, _ := g.held(two); return p == 2 })
	if !refused("127.0.0.2") {
		t.Fatal("a third silent connection of one source was not closed")
	}
	if n := testutil.ToFloat64(mm.refused.WithLabelValues(refusedPending)); n != 1 {
		t.Fatalf("refused pending_per_source = %v, want 1", n)
	}

	// Served connections: up to PerSource of one source.
	for range 4 {
		if st := request(t, dial("127.0.0.3"), "/ok"); st != "200 OK" {
			t.Fatalf("GET /ok: %s", st)
		}
	}
	eventually(t, 10*time.Second, "127.0.0.3 holds 4 served connections", func() bool { _, s := g.held(three); return s == 4 })
	if !refused("127.0.0.3") {
		t.Fatal("a fifth connection of one source was not closed")
	}
	if n := testutil.ToFloat64(mm.refused.WithLabelValues(refusedSource)); n != 1 {
		t.Fatalf("refused per_source = %v, want 1", n)
	}
	// 2 + 4 = Total: another source is refused too.
	if !refused("127.0.0.4") {
		t.Fatal("a connection past the port's total was not closed")
	}
	if n := testutil.ToFloat64(mm.refused.WithLabelValues(refusedTotal)); n != 1 {
		t.Fatalf("refused total = %v, want 1", n)
	}

	for _, c := range silent {
		_ = c.Close()
	}
	eventually(t, 10*time.Second, "127.0.0.2's slots are freed", func() bool { p, s := g.held(two); return p+s == 0 })
	if st := request(t, dial("127.0.0.4"), "/ok"); st != "200 OK" {
		t.Fatalf("GET /ok once slots were freed: %s", st)
	}
	if _, s := g.held(four); s != 1 {
		t.Fatalf("127.0.0.4 holds %d served connections, want 1", s)
	}
}

// TestManageGuardHeaderDeadline: a connection that sends no request
// header is closed at the header deadline and its slot freed, and one
// that sends it in time is served.
func TestManageGuardHeaderDeadline(t *testing.T) {
	addr, g, _ := guardedServer(t, manageLimits{Total: 8, PerSource: 8, PendingPerSource: 1, HeaderDeadline: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dialFrom(ctx, "127.0.0.2", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !closedByServer(c, 20*time.Second) {
		t.Fatal("a silent connection was not closed at the header deadline")
	}
	src := netip.MustParseAddr("127.0.0.2")
	eventually(t, 10*time.Second, "the silent connection's slot is freed", func() bool { p, s := g.held(src); return p+s == 0 })
	c2, err := dialFrom(ctx, "127.0.0.2", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if st := request(t, c2, "/ok"); st != "200 OK" {
		t.Fatalf("GET /ok: %s", st)
	}
}

// TestManagePortRecoversPanics: a handler that panics answers 500 and is
// counted, and the port goes on serving (net/http alone drops the
// connection without a word).
func TestManagePortRecoversPanics(t *testing.T) {
	addr, _, mm := guardedServer(t, defaultManageLimits)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := dialFrom(ctx, "127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if st := request(t, c, "/panic"); st != "500 Internal Server Error" {
		t.Fatalf("GET /panic: %s", st)
	}
	if n := testutil.ToFloat64(mm.panics); n != 1 {
		t.Fatalf("panics counted = %v, want 1", n)
	}
	if st := request(t, c, "/ok"); st != "200 OK" {
		t.Fatalf("GET /ok after a panic: %s", st)
	}
}

// TestLogLimiter: one line per key per interval, with the count of those
// held back; its memory is bounded.
func TestLogLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := newLogLimiter(time.Second)
	l.now = func() time.Time { return now }
	if ok, _ := l.allow("a"); !ok {
		t.Fatal("first line held back")
	}
	for range 3 {
		if ok, _ := l.allow("a"); ok {
			t.Fatal("a line within the interval let through")
		}
	}
	if ok, _ := l.allow("b"); !ok {
		t.Fatal("another key's first line held back")
	}
	now = now.Add(time.Second)
	if ok, n := l.allow("a"); !ok || n != 3 {
		t.Fatalf("after the interval: %v, %d held back; want true, 3", ok, n)
	}
	for i := range 2 * maxLoggedSources {
		l.allow(fmt.Sprint(i))
	}
	if len(l.last) > maxLoggedSources {
		t.Fatalf("%d keys remembered, bound %d", len(l.last), maxLoggedSources)
	}
}

// TestManageGuardTLS: under TLS a connection is pending through its
// handshake and until its request header, then served (the guard finds
// its connection under the TLS one); a silent one stays pending, so a
// source's kept-alive TLS connections never fill its pending budget.
func TestManageGuardTLS(t *testing.T) {
	ca, cert, key, err := GenerateCerts(filepath.Join(t.TempDir(), "cluster"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	addr, g, _ := guardedServerTLS(t, manageLimits{Total: 16, PerSource: 8, PendingPerSource: 1, HeaderDeadline: time.Minute}, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	local := netip.MustParseAddr("127.0.0.1")
	// Two kept-alive HTTPS connections of one source, with a pending
	// budget of one: each must have become served.
	for range 2 {
		nc, err := dialFrom(ctx, "127.0.0.1", addr)
		if err != nil {
			t.Fatal(err)
		}
		c := tls.Client(nc, &tls.Config{Certificates: cfg.Certificates, RootCAs: cfg.RootCAs, ServerName: "127.0.0.1"})
		defer c.Close()
		if st := request(t, c, "/ok"); st != "200 OK" {
			t.Fatalf("GET /ok over TLS: %s", st)
		}
	}
	if p, s := g.held(local); p != 0 || s != 2 {
		t.Fatalf("127.0.0.1 holds %d pending and %d served connections, want 0 and 2", p, s)
	}
	silent, err := dialFrom(ctx, "127.0.0.1", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	eventually(t, 10*time.Second, "the silent connection is pending", func() bool { p, _ := g.held(local); return p == 1 })
}

// Under TLS a source's served connections count by certificate: one
// certificate on an address holds at most PerSource of them, and another
// certificate on the same address still gets its own.
func TestManageGuardCountsByCertificate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster")
	ca, cert, key, err := GenerateCerts(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := TLSConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey, err := certs.Issue(dir, "other", []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := TLSConfig(otherCert, otherKey, ca)
	if err != nil {
		t.Fatal(err)
	}
	addr, g, mm := guardedServerTLS(t, manageLimits{Total: 16, PerSource: 2, PendingPerSource: 4, HeaderDeadline: time.Minute}, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	get := func(c *tls.Config) (string, error) {
		nc, err := dialFrom(ctx, "127.0.0.2", addr)
		if err != nil {
			return "", err
		}
		tc := tls.Client(nc, &tls.Config{Certificates: c.Certificates, RootCAs: c.RootCAs, ServerName: "127.0.0.1"})
		t.Cleanup(func() { _ = tc.Close() })
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(tc, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), nil)
		if err != nil {
			return "", err
		}
		resp.Body.Close()
		return resp.Status, nil
	}
	for range 2 {
		if st, err := get(cfg); err != nil || st != "200 OK" {
			t.Fatalf("a connection within the bound: %s %v", st, err)
		}
	}
	if st, err := get(cfg); err == nil {
		t.Fatalf("a third connection of one certificate from one address was served: %s", st)
	}
	if n := testutil.ToFloat64(mm.refused.WithLabelValues(refusedIdentity)); n != 1 {
		t.Fatalf("refused %s = %v, want 1", refusedIdentity, n)
	}
	// Another certificate on the same address: its own bound.
	if st, err := get(other); err != nil || st != "200 OK" {
		t.Fatalf("another certificate on the same address: %s %v", st, err)
	}
	if _, served := g.held(netip.MustParseAddr("127.0.0.2")); served != 3 {
		t.Fatalf("127.0.0.2 holds %d served connections, want 3", served)
	}
}
