package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// silencingPeer serves every stream request with one object, on as many
// requests per connection as come, until silence: the connections open
// then go on reading and answer nothing, as the peer's end of a
// connection that an outage left half-open does, while those accepted
// later answer as before.
type silencingPeer struct {
	data []byte
	ln   net.Listener
	wg   sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool // true: silenced
}

func newSilencingPeer(t *testing.T, data []byte) (*silencingPeer, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &silencingPeer{data: data, ln: ln, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = false
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				defer c.Close()
				p.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p, ln.Addr().String()
}

// silence makes every connection open now answer nothing from here on.
func (p *silencingPeer) silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		p.conns[c] = true
	}
}

func (p *silencingPeer) silenced(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns[c]
}

func (p *silencingPeer) serve(c net.Conn) {
	c.SetDeadline(time.Now().Add(hangGuard))
	for {
		var h [reqHeaderLen]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return
		}
		if p.silenced(c) {
			io.Copy(io.Discard, c) // reads on, answers never
			return
		}
		req := parseRequestHeader(&h)
		if _, err := io.ReadFull(c, make([]byte, req.idLen)); err != nil {
			return
		}
		out := respond(int64(len(p.data)))
		for off := req.offset; off < int64(len(p.data)); off += int64(req.chunk) {
			out = append(out, dataFrame(p.data[off:min(off+int64(req.chunk), int64(len(p.data)))])...)
		}
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}

// A stream that gets no byte from a reused connection for as long as its
// caller waits (a member's stall timeout) closes the other connections
// pooled for that peer: they idled through the same outage, and the
// next attempt (a fetch that located the same sender again) dials afresh
// instead of stalling again on each of them in turn.
func TestTCPStallForgetsThePeersPooledConnections(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	data := pattern(3000)
	peer, addr := newSilencingPeer(t, data)
	cli := newTCP(t, TCPConfig{MaxConnsPerPeer: 4})

	// Three streams at once: three connections, pooled as they end.
	fill := func() {
		t.Helper()
		var streams []Stream
		for range 3 {
			s, err := cli.Open(ctx, "", addr, "o", 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, s)
		}
		for _, s := range streams {
			if got := drain(t, ctx, s, 1000); !bytes.Equal(got, data) {
				t.Fatal("other bytes")
			}
			s.Close()
		}
		if n := cli.poolSize(addr); n != 3 {
			t.Fatalf("pool holds %d connections, want 3", n)
		}
	}
	fill()
	dials := cli.dials.Load()
	peer.silence()

	// The first attempt takes a pooled connection and waits in vain.
	sctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err := cli.Open(sctx, "", addr, "o", 0, 1000)
	cancel()
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("open on a silenced connection: %v, want TIMEOUT", err)
	}
	if n := cli.poolSize(addr); n != 0 {
		t.Fatalf("%d connections to the peer still pooled after a stream to it stalled", n)
	}
	// The next one dials, and is answered. (Before, it took the next
	// silenced connection and stalled as long again.)
	s, err := cli.Open(ctx, "", addr, "o", 0, 1000)
	if err != nil {
		t.Fatalf("open after the stall: %v", err)
	}
	if got := drain(t, ctx, s, 1000); !bytes.Equal(got, data) {
		t.Fatal("other bytes")
	}
	s.Close()
	if d := cli.dials.Load() - dials; d != 1 {
		t.Fatalf("%d dials after the stall, want 1", d)
	}

	// A control request that gets no answer by its deadline does the same.
	fill()
	peer.silence()
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = cli.Call(cctx, addr, 1, []byte("locate"))
	cancel()
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("control request on a silenced connection: %v, want TIMEOUT", err)
	}
	if n := cli.poolSize(addr); n != 0 {
		t.Fatalf("%d connections to the peer still pooled after a control request to it got no answer", n)
	}
}

// A chunk that arrives slower than the caller waits shows its progress:
// the payload bytes that came, fewer than the socket was asked to wake
// the reader for (SO_RCVLOWAT: the whole chunk), are taken when the wait
// ends (PayloadReceived counts them), and the next call finishes the
// chunk from there.
func TestTCPSlowChunkShowsItsProgress(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	data := pattern(1000)
	part, rest := make(chan struct{}), make(chan struct{})
	addr := fakePeer(t, func(c net.Conn, req tcpRequest) {
		c.Write(cat(respond(int64(len(data))), appendFrameHeader(nil, frameData, len(data))))
		<-part
		c.Write(data[:400])
		<-rest
		c.Write(data[400:])
		readUntilEOF(c)
	})
	var once [2]sync.Once
	send := func(i int, ch chan struct{}) { once[i].Do(func() { close(ch) }) }
	t.Cleanup(func() { send(0, part); send(1, rest) }) // before the peer's: it waits for them
	cli := newTCP(t, TCPConfig{})
	s, err := cli.Open(ctx, "", addr, "o", 0, len(data))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dst := make([]byte, len(data))
	done := make(chan error, 1)
	wctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	go func() {
		_, err := s.NextInto(wctx, dst)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the reader waits on the socket first
	send(0, part)
	if err := <-done; !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("NextInto of a chunk 400 bytes of which came: %v, want TIMEOUT", err)
	}
	if got := s.(PayloadCounter).PayloadReceived(); got != 400 {
		t.Fatalf("%d payload bytes received, want the 400 that came", got)
	}
	send(1, rest)
	n, err := s.NextInto(ctx, dst)
	if err != nil || n != len(data) || !bytes.Equal(dst, data) {
		t.Fatalf("the chunk's rest: %d bytes, %v", n, err)
	}
}
