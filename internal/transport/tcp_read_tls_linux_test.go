package transport

import (
	"bytes"
	"crypto/tls"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/certs"
)

// holdingConn is a peer's end of a connection whose writes, once hold is
// set, are kept instead of sent: the test sends them itself, in the
// pieces it chooses.
type holdingConn struct {
	net.Conn
	mu   sync.Mutex
	hold bool
	held []byte
}

func (c *holdingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.hold {
		c.held = append(c.held, p...)
		c.mu.Unlock()
		return len(p), nil
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *holdingConn) take() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.held
	c.held = nil
	return b
}

// A payload read under TLS returns once the last record of the payload
// has come, also when crypto/tls had already read the start of that
// record and the socket then gets fewer bytes than the payload's rest.
// It asked the socket to wake it for the whole rest (SO_RCVLOWAT), and a
// stream whose one frame ended so waited to its deadline with the bytes
// in the socket: a fetch of a one-chunk object stalled at offset 0.
func TestTLSPayloadReadWakesForTheLastRecordsRest(t *testing.T) {
	cfg := tlsConfig(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	pc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer pc.Close()

	peer := &holdingConn{Conn: pc}
	scfg := cfg.Clone()
	scfg.SessionTicketsDisabled = true // no ticket records after the handshake
	server := tls.Server(peer, scfg)
	client := tls.Client(nc, certs.ForAddr(cfg, ln.Addr().String()))
	guard := time.Now().Add(hangGuard)
	server.SetDeadline(guard)
	client.SetDeadline(guard)
	herr := make(chan error, 1)
	go func() { herr <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-herr; err != nil {
		t.Fatal(err)
	}

	payload := pattern(1000) // one record
	peer.mu.Lock()
	peer.hold = true
	peer.mu.Unlock()
	if _, err := server.Write(payload); err != nil {
		t.Fatal(err)
	}
	raw := peer.take()
	const tail = 100 // less than the record's bytes, more than its overhead
	if len(raw) <= len(payload) || len(raw) > len(payload)+64 {
		t.Fatalf("%d raw bytes for a payload of %d: not one record", len(raw), len(payload))
	}

	r := newConnReader(client)
	if r.raw == nil {
		t.Fatal("no socket under the TLS connection")
	}
	got := make([]byte, len(payload))
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	deadline := time.Now().Add(hangGuard / 2)
	client.SetReadDeadline(deadline)
	go func() {
		n, err := r.ReadFull(got, true)
		done <- result{n, err}
	}()
	// The record's start: crypto/tls reads it and waits for the rest.
	if _, err := pc.Write(raw[:len(raw)-tail]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reader takes the record's start from the socket", func() bool { return queued(r.raw) == 0 })
	// Let the reader go back to waiting on the empty socket before the
	// rest comes (sent earlier, it is read at once either way).
	time.Sleep(50 * time.Millisecond)
	if _, err := pc.Write(raw[len(raw)-tail:]); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	res := <-done
	if res.err != nil {
		t.Fatalf("payload read: %d of %d bytes, %v (the record's last %d bytes were in the socket for %v of it)",
			res.n, len(payload), res.err, tail, deadline.Sub(sent).Round(time.Millisecond))
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("other bytes")
	}
}
