package transport

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// hungSource answers kind 'e' at once and never answers kind 'h' (nor
// closes its connection) until released: a peer whose host was cut off or
// whose process stopped, which no reset from its end tells the caller.
type hungSource struct {
	*fakeSource
	entered chan struct{}
	release chan struct{}
}

func (s *hungSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	if kind == 'h' {
		s.entered <- struct{}{}
		<-s.release
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "released")
	}
	return append([]byte{kind}, req...), nil
}

// A Locate on a pooled connection whose peer then died without a word
// waited for its deadline (30 s here), although the member's failure
// detection had told the transport in a fraction of it (ForgetPeer). It
// ends UNAVAILABLE once the peer is forgotten, and is not sent again on
// a fresh connection to the same peer: its caller asks where its view now
// says. The forgotten connection is not pooled again.
func TestTCPForgetPeerEndsTheCallsRunningToIt(t *testing.T) {
	noLeaks(t)
	src := &hungSource{fakeSource: newFakeSource(), entered: make(chan struct{}, 4), release: make(chan struct{})}
	_, cli, addr := tcpPair(t, src, TCPConfig{}, TCPConfig{})
	var once sync.Once
	// Before the server's Close (cleanups run last first), which waits
	// for the handler.
	t.Cleanup(func() { once.Do(func() { close(src.release) }) })
	ctx := guardCtx(t)
	if _, err := cli.Call(ctx, addr, 'e', []byte("warm")); err != nil {
		t.Fatal(err)
	}
	if n := cli.poolSize(addr); n != 1 {
		t.Fatalf("pool holds %d connections after a call, want 1", n)
	}
	dials := cli.dials.Load()

	const deadline = 30 * time.Second
	type result struct {
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		start := time.Now()
		_, err := cli.Call(cctx, addr, 'h', []byte("locate"))
		done <- result{err, time.Since(start)}
	}()
	select {
	case <-src.entered:
	case <-ctx.Done():
		t.Fatal("the call never reached the peer")
	}
	cli.ForgetPeer(addr)
	r := <-done
	if !errors.Is(r.err, messages.ErrUnavailable) {
		t.Fatalf("a call running to a peer that was forgotten: %v after %v, want UNAVAILABLE", r.err, r.took)
	}
	if r.took >= deadline {
		t.Fatalf("the call ended after %v, its whole deadline", r.took)
	}
	if d := cli.dials.Load() - dials; d != 0 {
		t.Fatalf("the call was sent again on %d fresh connections to the forgotten peer", d)
	}
	if n := cli.poolSize(addr); n != 0 {
		t.Fatalf("%d connections pooled to the forgotten peer", n)
	}
	once.Do(func() { close(src.release) })
	// A peer forgotten by mistake (it is alive) is met afresh.
	if _, err := cli.Call(ctx, addr, 'e', []byte("again")); err != nil {
		t.Fatalf("a call after the peer was forgotten: %v", err)
	}
}
