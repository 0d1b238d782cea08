package transport

import (
	"net"
	"syscall"
	"testing"
)

// keepIdle is the TCP keep-alive idle time, in seconds, the kernel holds
// for nc (0 when keep-alive is off).
func keepIdle(t *testing.T, nc net.Conn) int {
	t.Helper()
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		t.Fatalf("a %T, not a TCP connection", nc)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on, idle int
	var serr error
	if err := raw.Control(func(fd uintptr) {
		if on, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_KEEPALIVE); serr == nil {
			idle, serr = syscall.GetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_KEEPIDLE)
		}
	}); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if on == 0 {
		return 0
	}
	return idle
}

// Both ends of a data-plane connection probe it by KeepAlive, not by
// Go's 15 s default: a member keeps connections to its warm peers idle
// between operations, and their probes were most of its idle packets.
func TestTCPConnectionsKeepAliveRarely(t *testing.T) {
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("o", complete(pattern(1000)))
	srv, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	s, err := cli.Open(ctx, "", addr, "o", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	drain(t, ctx, s, 1000)
	s.Close()
	want := int(KeepAlive.Idle.Seconds())
	cli.mu.Lock()
	pooled := cli.pool[addr]
	cli.mu.Unlock()
	if len(pooled) != 1 {
		t.Fatalf("%d pooled connections, want 1", len(pooled))
	}
	if got := keepIdle(t, pooled[0].nc); got != want {
		t.Errorf("the dialed end probes after %d s idle, want %d", got, want)
	}
	sv := srv.server(addr)
	sv.mu.Lock()
	var served []net.Conn
	for c := range sv.conns {
		served = append(served, c)
	}
	sv.mu.Unlock()
	if len(served) != 1 {
		t.Fatalf("%d served connections, want 1", len(served))
	}
	if got := keepIdle(t, served[0]); got != want {
		t.Errorf("the accepted end probes after %d s idle, want %d", got, want)
	}
}
