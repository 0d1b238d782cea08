package transport

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// parkingSource serves fakeSource's objects, except that ids starting
// with "park" wait until their ctx ends (an object announced but never
// coming), and "panic" panics; its control kinds are ctlSource's, 'p'
// panics, and 'q' panics once its request counts as parked.
type parkingSource struct {
	*ctlSource
	parked atomic.Int64 // OpenObject calls waiting now
}

func newParkingSource() *parkingSource { return &parkingSource{ctlSource: newCtlSource()} }

func (s *parkingSource) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	switch {
	case id == "panic":
		panic("a bug in the Source")
	case strings.HasPrefix(id, "park"):
		s.parked.Add(1)
		defer s.parked.Add(-1)
		<-ctx.Done()
		return nil, messages.AsError(ctx.Err())
	}
	return s.fakeSource.OpenObject(ctx, id)
}

func (s *parkingSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	switch kind {
	case 'p':
		panic("a bug in the Controller")
	case 'q': // parked first (past hangupDelay), then a bug
		time.Sleep(10 * hangupDelay)
		panic("a bug in the Controller, parked")
	}
	return s.ctlSource.Control(ctx, kind, req)
}

// dialFrom connects to a data address from the loopback address ip
// (Linux routes all of 127.0.0.0/8 to loopback).
func dialFrom(t testing.TB, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: hangGuard, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", HostPort(addr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// counts is how many connections s holds, and how many of them are
// pending.
func (s *tcpServer) counts() (conns, pending int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.pending
}

// pendingOf is how many pending connections ip holds.
func (s *tcpServer) pendingOf(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.sources[ip]; c != nil {
		return c.pending
	}
	return 0
}

// parkedOf is how many parked requests source holds.
func (s *tcpServer) parkedOf(source string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.sources[source]; c != nil {
		return c.parked
	}
	return 0
}

// closedByServer says whether the server closed c (a read ends at once
// with EOF or a reset rather than waiting for hangGuard).
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(hangGuard))
	_, err := io.Copy(io.Discard, c)
	return err == nil || !isTimeout(err)
}

// refusalLines collects what Limited receives.
type refusalLines struct {
	mu    sync.Mutex
	lines []string
}

func (r *refusalLines) add(peer string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, peer+": "+err.Error())
}

func (r *refusalLines) count(sub string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			n++
		}
	}
	return n
}

// wantErrorAnswer reads an answer of one error frame from c: code and
// a message containing sub.
func wantErrorAnswer(t *testing.T, c net.Conn, code messages.ErrorCode, sub string) {
	t.Helper()
	pre, frames, _ := readRaw(t, c, 1)
	if !bytes.Equal(pre, appendPreamble(nil)) || len(frames) != 1 || frames[0].kind != frameError {
		t.Fatalf("answer %q %v, want an error frame", pre, frames)
	}
	err, ok := decodeError(frames[0].p, "")
	if !ok || !errors.Is(err, &messages.Error{Code: code}) || !strings.Contains(err.Error(), sub) {
		t.Fatalf("error %v, want %v containing %q", err, code, sub)
	}
}

// goodRequest opens o from cli and reads it whole within hangGuard.
func goodRequest(t *testing.T, cli *TCP, addr string, data []byte) {
	t.Helper()
	ctx := guardCtx(t)
	s, err := cli.Open(ctx, "", addr, "o", 0, 64)
	if err != nil {
		t.Fatalf("a good request: %v", err)
	}
	defer s.Close()
	if got := drain(t, ctx, s, 64); !bytes.Equal(got, data) {
		t.Fatalf("a good request read %d bytes, not the object", len(got))
	}
}

// TestTCPHandshakeTimeout: a connection that sends no request, or only
// part of one, is closed HandshakeTimeout after it connected, however
// long RequestTimeout is, and counted; so is one that starts no TLS
// handshake.
func TestTCPHandshakeTimeout(t *testing.T) {
	noLeaks(t)
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			var lim refusalLines
			cfg := TCPConfig{HandshakeTimeout: 300 * time.Millisecond, RequestTimeout: time.Hour, IdleTimeout: time.Hour, Limited: lim.add}
			if useTLS {
				cfg.TLS = tlsConfig(t)
			}
			src := newParkingSource()
			srv, _, addr := tcpPair(t, src, cfg, TCPConfig{})
			silent := dialFrom(t, "127.0.0.1", addr)
			if !closedByServer(silent) {
				t.Fatal("a silent connection was not closed by HandshakeTimeout")
			}
			if !useTLS {
				half := dialFrom(t, "127.0.0.1", addr)
				half.Write(encodeRequest("o", 0, 64, 0, false, 0)[:10])
				if !closedByServer(half) {
					t.Fatal("a connection with half a request was not closed by HandshakeTimeout")
				}
			}
			want := int64(2)
			if useTLS {
				want = 1
				plain := dialFrom(t, "127.0.0.1", addr)
				plain.Write(encodeRequest("o", 0, 64, 0, false, 0))
				if !closedByServer(plain) {
					t.Fatal("a plaintext request on a TLS data port was kept")
				}
				eventually(t, "the failed handshake is counted", func() bool { return srv.Stats().HandshakeFailures == 1 })
			}
			deadline := time.Now().Add(hangGuard)
			for srv.Stats().HandshakeTimeouts != want || lim.count("HandshakeTimeout") != 1 {
				if time.Now().After(deadline) {
					t.Fatalf("stats %+v, Limited got %q; want %d timeouts and one line naming HandshakeTimeout", srv.Stats(), lim.lines, want)
				}
				time.Sleep(2 * time.Millisecond)
			}
			eventually(t, "the server lets go of them", func() bool { c, p := srv.server(addr).counts(); return c == 0 && p == 0 })
		})
	}
}

// TestTCPPendingLimits: connections that have not sent their first
// request are bounded per source and in total; those over a bound are
// closed at once and counted, and other sources are still served.
func TestTCPPendingLimits(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	var lim refusalLines
	srv, cli, addr := tcpPair(t, src, TCPConfig{MaxPendingPerSource: 3, MaxPendingConns: 4, MaxServerConns: 6,
		HandshakeTimeout: time.Hour, RequestTimeout: time.Hour, Limited: lim.add}, TCPConfig{})
	s := srv.server(addr)
	for range 3 {
		dialFrom(t, "127.0.0.2", addr)
	}
	eventually(t, "three pending from 127.0.0.2", func() bool { _, p := s.counts(); return p == 3 })
	if c := dialFrom(t, "127.0.0.2", addr); !closedByServer(c) {
		t.Fatal("a fourth silent connection from 127.0.0.2 was kept")
	}
	if got := srv.Stats().RefusedSourcePending; got != 1 {
		t.Fatalf("RefusedSourcePending = %d, want 1", got)
	}
	if lim.count("127.0.0.2") != 1 || lim.count("MaxPendingPerSource") != 1 {
		t.Fatalf("Limited got %q, want one line naming the source and the limit", lim.lines)
	}
	// Another source is served meanwhile: its connection becomes
	// established (pooled) and leaves the pending budget.
	goodRequest(t, cli, addr, data)
	third := dialFrom(t, "127.0.0.3", addr)
	eventually(t, "four pending", func() bool { _, p := s.counts(); return p == 4 })
	if c := dialFrom(t, "127.0.0.4", addr); !closedByServer(c) {
		t.Fatal("a fifth pending connection was kept")
	}
	if got := srv.Stats().RefusedPending; got != 1 {
		t.Fatalf("RefusedPending = %d, want 1", got)
	}
	third.Close()
	eventually(t, "three pending", func() bool { _, p := s.counts(); return p == 3 })
	// The pooled connection carries the next request; two more fill
	// MaxServerConns, and the next is refused.
	goodRequest(t, cli, addr, data)
	ok := dialFrom(t, "127.0.0.1", addr)
	ok.Write(encodeRequest("o", 0, 64, 0, false, 0))
	if _, frames, _ := readRaw(t, ok, 2); len(frames) != 2 || frames[1].kind != frameData {
		t.Fatalf("frames %v, want the object", frames)
	}
	dialFrom(t, "127.0.0.6", addr)
	eventually(t, "six connections", func() bool { n, _ := s.counts(); return n == 6 })
	if c := dialFrom(t, "127.0.0.5", addr); !closedByServer(c) {
		t.Fatal("a connection past MaxServerConns was kept")
	}
	if got := srv.Stats().RefusedTotal; got != 1 {
		t.Fatalf("RefusedTotal = %d, want 1", got)
	}
}

// TestTCPConnsPerSourceLimit: a source holds at most MaxConnsPerSource
// established connections; the next one's first request is answered
// RESOURCE_EXHAUSTED and the connection closed, and other sources are
// served.
func TestTCPConnsPerSourceLimit(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	srv, cli, addr := tcpPair(t, src, TCPConfig{MaxConnsPerSource: 2}, TCPConfig{})
	for range 2 {
		c := dialFrom(t, "127.0.0.2", addr)
		c.Write(encodeRequest("o", 0, 64, 0, false, 0))
		if _, frames, _ := readRaw(t, c, 3); len(frames) != 3 {
			t.Fatalf("frames %v, want the object", frames)
		}
	}
	c := dialFrom(t, "127.0.0.2", addr)
	c.Write(encodeRequest("o", 0, 64, 0, false, 0))
	wantErrorAnswer(t, c, messages.ErrorCode_RESOURCE_EXHAUSTED, "MaxConnsPerSource")
	if !closedByServer(c) {
		t.Fatal("the refused connection stayed open")
	}
	if got := srv.Stats().RefusedSource; got != 1 {
		t.Fatalf("RefusedSource = %d, want 1", got)
	}
	goodRequest(t, cli, addr, data)
}

// TestTCPParkedLimit: a source has at most MaxParkedPerSource requests
// waiting for their object or answer; one more, stream or control, is
// answered RESOURCE_EXHAUSTED at once on a connection that stays usable.
func TestTCPParkedLimit(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	srv, cli, addr := tcpPair(t, src, TCPConfig{MaxParkedPerSource: 2, StallTimeout: time.Hour}, TCPConfig{})
	for i := range 2 {
		c := dialFrom(t, "127.0.0.2", addr)
		c.Write(encodeRequest(fmt.Sprintf("park%d", i), 0, 64, 0, false, 0))
	}
	eventually(t, "two requests parked", func() bool { return srv.server(addr).parkedOf("127.0.0.2") == 2 })
	c := dialFrom(t, "127.0.0.2", addr)
	c.Write(encodeRequest("park2", 0, 64, 0, false, 0))
	wantErrorAnswer(t, c, messages.ErrorCode_RESOURCE_EXHAUSTED, "MaxParkedPerSource")
	// The connection carries the next request.
	c.Write(encodeRequest("o", 0, 64, 0, false, 0))
	if _, frames, _ := readRaw(t, c, 1); len(frames) != 1 || frames[0].kind != frameSize {
		t.Fatalf("after a refused park: frames %v, want the object's size", frames)
	}
	// A control request too.
	ctl := dialFrom(t, "127.0.0.2", addr)
	ctl.Write(encodeControl('w', nil, time.Hour, 0))
	wantErrorAnswer(t, ctl, messages.ErrorCode_RESOURCE_EXHAUSTED, "MaxParkedPerSource")
	if got := srv.Stats().RefusedParked; got != 2 {
		t.Fatalf("RefusedParked = %d, want 2", got)
	}
	// Another source parks and is answered as ever.
	ctx, cancel := context.WithTimeout(guardCtx(t), 300*time.Millisecond)
	defer cancel()
	if _, err := cli.Call(ctx, addr, 'w', nil); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("a parked call from another source = %v, want its deadline", err)
	}
	goodRequest(t, cli, addr, data)
}

// TestTCPParkedStreamHangup: a receiver that closes its connection while
// its request is parked frees the connection and the Source's wait at
// once, not at the next keepalive (an hour away here).
func TestTCPParkedStreamHangup(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	srv, _, addr := tcpPair(t, src, TCPConfig{StallTimeout: 3 * time.Hour}, TCPConfig{})
	c := dialFrom(t, "127.0.0.2", addr)
	c.Write(encodeRequest("park", 0, 64, 0, false, 0))
	eventually(t, "the request parked", func() bool { return src.parked.Load() == 1 })
	c.Close()
	eventually(t, "the Source's wait ends", func() bool { return src.parked.Load() == 0 })
	eventually(t, "the connection is gone", func() bool { n, _ := srv.server(addr).counts(); return n == 0 })
}

// TestTCPFloodFromOneSource: 1,024 connections from 127.0.0.2, half of
// them parking a request and half saying nothing, leave a client at
// 127.0.0.1 answered throughout, and once they close the server is back
// to the client's connections alone: no period of refused connections.
func TestTCPFloodFromOneSource(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	srv, cli, addr := tcpPair(t, src, TCPConfig{StallTimeout: 3 * time.Hour, HandshakeTimeout: time.Hour, RequestTimeout: time.Hour}, TCPConfig{})
	s := srv.server(addr)

	var wg sync.WaitGroup
	var mu sync.Mutex
	var flood []net.Conn
	dials := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := net.Dialer{Timeout: hangGuard, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
			for i := range dials {
				c, err := d.Dial("tcp", HostPort(addr))
				if err != nil {
					t.Error(err)
					return
				}
				if i < 512 {
					c.Write(encodeRequest(fmt.Sprintf("park%d", i), 0, 64, 0, false, 0))
				}
				mu.Lock()
				flood = append(flood, c)
				mu.Unlock()
			}
		}()
	}
	stop := make(chan struct{})
	var answered atomic.Int64
	var good sync.WaitGroup
	good.Add(1)
	go func() {
		defer good.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			goodRequest(t, cli, addr, data)
			answered.Add(1)
		}
	}()
	// First the connections that park a request, then the silent ones.
	for i := range 1024 {
		if i == 512 {
			eventually(t, "the flood's requests parked", func() bool {
				return src.parked.Load() > 0 && s.pendingOf("127.0.0.2") == 0
			})
		}
		dials <- i
	}
	close(dials)
	wg.Wait()
	// The flood is in: the server holds what the limits allow of it.
	eventually(t, "the flood's silent connections fill their pending budget", func() bool {
		return s.pendingOf("127.0.0.2") == srv.cfg.MaxPendingPerSource
	})
	before := answered.Load()
	eventually(t, "the client is answered with the flood in", func() bool { return answered.Load() >= before+20 })
	eventually(t, "the Source holds no more waits than MaxParkedPerSource", func() bool {
		return src.parked.Load() <= int64(srv.cfg.MaxParkedPerSource)
	})
	st := srv.Stats()
	if st.RefusedSourcePending == 0 {
		t.Fatalf("stats %+v: no silent connection of the flood was refused", st)
	}
	t.Logf("%d requests parked; stats %+v", src.parked.Load(), st)
	close(stop)
	good.Wait()

	mu.Lock()
	for _, c := range flood {
		c.Close()
	}
	mu.Unlock()
	// Good requests go through at once: each of these dials a connection
	// of its own (the pool holds fewer).
	ctx := guardCtx(t)
	var streams []Stream
	for range 8 {
		st, err := cli.Open(ctx, "", addr, "o", 0, 64)
		if err != nil {
			t.Fatalf("a good request right after the flood: %v", err)
		}
		streams = append(streams, st)
	}
	for _, st := range streams {
		if got := drain(t, ctx, st, 64); !bytes.Equal(got, data) {
			t.Fatal("not the object")
		}
		st.Close()
	}
	eventually(t, "the server lets go of the flood", func() bool {
		n, p := s.counts()
		return n <= srv.cfg.MaxConnsPerPeer && p == 0 && src.parked.Load() == 0
	})
}

// TestTCPRefusalsAreRateLimited: a flood of refusals from one source
// logs one line (later lines say how many they stand for) while the
// counters count them all.
func TestTCPRefusalsAreRateLimited(t *testing.T) {
	noLeaks(t)
	var lim refusalLines
	srv, _, addr := tcpPair(t, newParkingSource(), TCPConfig{MaxPendingPerSource: 1, HandshakeTimeout: time.Hour, Limited: lim.add}, TCPConfig{})
	dialFrom(t, "127.0.0.2", addr)
	eventually(t, "one pending", func() bool { _, p := srv.server(addr).counts(); return p == 1 })
	for range 20 {
		if c := dialFrom(t, "127.0.0.2", addr); !closedByServer(c) {
			t.Fatal("a connection over the limit was kept")
		}
	}
	if got := srv.Stats().RefusedSourcePending; got != 20 {
		t.Fatalf("RefusedSourcePending = %d, want 20", got)
	}
	if n := lim.count("127.0.0.2"); n != 1 {
		t.Fatalf("%d lines for 20 refusals within %v: %q", n, refusalLogEvery, lim.lines)
	}
	// Suppressed lines are counted for the next one.
	srv.rlog.mu.Lock()
	srv.rlog.by["limit 127.0.0.2"].last = time.Now().Add(-refusalLogEvery)
	srv.rlog.mu.Unlock()
	if c := dialFrom(t, "127.0.0.2", addr); !closedByServer(c) {
		t.Fatal("a connection over the limit was kept")
	}
	if lim.count("and 19 more refused from 127.0.0.2") != 1 {
		t.Fatalf("lines %q, want one counting the 19 suppressed", lim.lines)
	}
}

// TestTCPPanicWhileServing: a Source or Controller that panics closes
// the connection it served, not the process; the panic is counted and
// logged, and the server serves on.
func TestTCPPanicWhileServing(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	var lim refusalLines
	var log logSink
	srv, cli, addr := tcpPair(t, src, TCPConfig{Limited: lim.add, Log: log.logf}, TCPConfig{})
	if s, err := cli.Open(ctx, "", addr, "panic", 0, 64); !errors.Is(err, messages.ErrUnavailable) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("Open of an object whose Source panics = %v, want UNAVAILABLE", err)
	}
	if _, err := cli.Call(ctx, addr, 'p', nil); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a call whose Controller panics = %v, want UNAVAILABLE", err)
	}
	if _, err := cli.Call(ctx, addr, 'q', nil); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a parked call whose Controller panics = %v, want UNAVAILABLE", err)
	}
	if got := srv.Stats().PanicsRecovered; got != 3 {
		t.Fatalf("PanicsRecovered = %d, want 3", got)
	}
	if lim.count("a bug in the Source") != 1 || !log.has("goroutine") {
		t.Fatalf("Limited got %q; want the panic, and its stack in the log", lim.lines)
	}
	goodRequest(t, cli, addr, data)
	eventually(t, "the panicked connections are gone, and what they held", func() bool {
		s := srv.server(addr)
		n, p := s.counts()
		s.mu.Lock()
		defer s.mu.Unlock()
		parked := 0
		for _, c := range s.sources {
			parked += c.parked
		}
		return n <= 1 && p == 0 && parked == 0
	})
}

// TestTCPReapsIdlePooledConnections: pooled connections nobody uses are
// closed once idle for half of IdleTimeout, with one timer for the whole
// pool, which stops once the pool is empty.
func TestTCPReapsIdlePooledConnections(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	srv, cli, addr := tcpPair(t, src, TCPConfig{IdleTimeout: time.Hour}, TCPConfig{IdleTimeout: 400 * time.Millisecond})
	// Three peers' worth of pooled connections: the same server at three
	// addresses (its plain host:port, and two more Serves).
	addrs := []string{addr}
	for _, node := range []string{"b", "c"} {
		a, err := srv.Serve(node, src)
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, a)
	}
	for _, a := range addrs {
		var streams []Stream
		for range 3 {
			s, err := cli.Open(ctx, "", a, "o", 0, 64)
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		for _, s := range streams {
			drain(t, ctx, s, 64)
			s.Close()
		}
	}
	eventually(t, "idle pooled connections are closed, and the servers see them go", func() bool {
		for _, a := range addrs {
			if n, _ := srv.server(a).counts(); n != 0 || cli.poolSize(a) != 0 {
				return false
			}
		}
		return true
	})
	// All nine were pooled (three streams at a time to each address),
	// and all nine reaped.
	if got := cli.Stats().IdleReaped; got != 9 {
		t.Fatalf("IdleReaped = %d, want 9", got)
	}
	eventually(t, "the reaper stops with the pool empty", func() bool {
		cli.mu.Lock()
		defer cli.mu.Unlock()
		return cli.reaper == nil
	})
	goodRequest(t, cli, addr, data)
}

// TestTCPForgetPeer: ForgetPeer closes the connections pooled for the
// peer at once, by its data address or by its host:port.
func TestTCPForgetPeer(t *testing.T) {
	noLeaks(t)
	src := newParkingSource()
	data := pattern(100)
	src.add("o", complete(data))
	srv, cli, addr := tcpPair(t, src, TCPConfig{IdleTimeout: time.Hour}, TCPConfig{IdleTimeout: time.Hour})
	other, err := srv.Serve("b", src)
	if err != nil {
		t.Fatal(err)
	}
	goodRequest(t, cli, addr, data)
	goodRequest(t, cli, other, data)
	cli.ForgetPeer(addr)
	if cli.poolSize(addr) != 0 || cli.poolSize(other) != 1 {
		t.Fatalf("pools %d and %d after ForgetPeer(%s), want 0 and 1", cli.poolSize(addr), cli.poolSize(other), addr)
	}
	eventually(t, "the server sees the connection go", func() bool { n, _ := srv.server(addr).counts(); return n == 0 })
	cli.ForgetPeer(HostPort(other))
	if cli.poolSize(other) != 0 {
		t.Fatal("ForgetPeer of a host:port kept its incarnation's connections")
	}
	if got := cli.Stats().IdleReaped; got != 2 {
		t.Fatalf("IdleReaped = %d, want 2", got)
	}
	goodRequest(t, cli, addr, data)
}

// TestTCPSourceUnderTLS: under TLS a connection's source is its address
// and its client certificate's identity, and MaxConnsPerSource counts
// them so.
func TestTCPSourceUnderTLS(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newParkingSource()
	src.add("o", complete(pattern(100)))
	cluster := tlsConfig(t)
	srv, cli, addr := tcpPair(t, src, TCPConfig{TLS: cluster, MaxConnsPerSource: 1, StallTimeout: time.Hour}, TCPConfig{TLS: cluster})
	parked, err := cli.Open(ctx, "", addr, "o", 0, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer parked.Close()
	s := srv.server(addr)
	s.mu.Lock()
	var keys []string
	for k, c := range s.sources {
		if c.established > 0 {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	if len(keys) != 1 || !strings.HasPrefix(keys[0], "127.0.0.1/") || len(keys[0]) <= len("127.0.0.1/") {
		t.Fatalf("sources %q, want one of 127.0.0.1 and a certificate identity", keys)
	}
	// The first stream holds the source's one connection.
	if s2, err := cli.Open(ctx, "", addr, "o", 0, 64); !errors.Is(err, messages.ErrResourceExhausted) || !strings.Contains(err.Error(), "MaxConnsPerSource") {
		if err == nil {
			s2.Close()
		}
		t.Fatalf("a second connection of the source = %v, want RESOURCE_EXHAUSTED naming MaxConnsPerSource", err)
	}
}
