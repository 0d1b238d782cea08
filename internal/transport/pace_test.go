package transport

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// TestReserveSharesOneClock: slots follow each other at the rate, in the
// order asked, whoever asks; a clock that fell behind restarts at now
// (idle time is owed to nobody).
func TestReserveSharesOneClock(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var next time.Time
	const rate = 1e6 // 1 MB/s: 1000 bytes a millisecond
	steps := []struct {
		now       time.Time
		n         int
		wantStart time.Duration // after t0
		wantNext  time.Duration
	}{
		{t0, 1000, 0, time.Millisecond},                                                                         // the first starts now
		{t0, 2000, time.Millisecond, 3 * time.Millisecond},                                                      // a second stream waits its turn
		{t0.Add(time.Millisecond), 1000, 3 * time.Millisecond, 4 * time.Millisecond},                            // the first again, behind it
		{t0.Add(10 * time.Millisecond), 500, 10 * time.Millisecond, 10*time.Millisecond + 500*time.Microsecond}, // idle: no credit
	}
	for i, s := range steps {
		got := reserve(&next, s.now, s.n, rate)
		if got != t0.Add(s.wantStart) || next != t0.Add(s.wantNext) {
			t.Fatalf("step %d: slot [%v, %v), want [%v, %v)", i, got.Sub(t0), next.Sub(t0), s.wantStart, s.wantNext)
		}
	}
}

// TestEgressPacerIgnoresNoRate: without a rate nothing waits, and no
// slot is reserved.
func TestEgressPacerIgnoresNoRate(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a wait would fail
	for _, p := range []*EgressPacer{NewEgressPacer(nil), NewEgressPacer(func() float64 { return 0 }), NewEgressPacer(func() float64 { return -1 })} {
		for range 2 {
			if err := p.wait(ctx, 100); err != nil {
				t.Fatal(err)
			}
		}
		if !p.next.IsZero() {
			t.Fatalf("an unpaced wait reserved a slot: %v", p.next)
		}
	}
}

// TestEgressPacerWaitEndsWithCtx: a stream waiting for a slot far ahead
// gives up when its ctx ends.
func TestEgressPacerWaitEndsWithCtx(t *testing.T) {
	p := NewEgressPacer(func() float64 { return 1 })
	p.next = time.Now().Add(time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.wait(ctx, 1); err != context.DeadlineExceeded {
		t.Fatalf("wait = %v, want the ctx's deadline", err)
	}
}

// TestTCPPacedStream: a paced stream asks the sender to pace it; the
// sender sends it through its pacer (and only it), the bytes unchanged.
func TestTCPPacedStream(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(1000)
	src.add("o", complete(data))
	// 1 MB/s: the 900 paced bytes take about a millisecond.
	srv, cli, addr := tcpPair(t, src, TCPConfig{Pace: func() float64 { return 1e6 }}, TCPConfig{})
	read := func(s Stream) []byte {
		t.Helper()
		var got []byte
		for {
			b, err := s.Next(ctx)
			if err == io.EOF {
				return got
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, b...)
		}
	}
	s, err := cli.Open(ctx, "b", addr, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(s); !bytes.Equal(got, data) {
		t.Fatalf("unpaced: %d bytes, not the object", len(got))
	}
	s.Close()
	if n := srv.PacedBytes(); n != 0 {
		t.Fatalf("an unpaced stream went through the pacer: %d bytes", n)
	}
	s, err = OpenPaced(ctx, cli, "b", addr, "o", 100, 100)
	if err != nil {
		t.Fatal(err)
	}
	if got := read(s); !bytes.Equal(got, data[100:]) {
		t.Fatalf("paced: %d bytes, not data[100:]", len(got))
	}
	s.Close()
	// The sender counts a chunk once its write returned, which the reader
	// can overtake: the last chunk may be counted after the EOF.
	eventually(t, "readers closed", func() bool { return src.openReaders() == 0 })
	eventually(t, "900 paced bytes", func() bool { return srv.PacedBytes() >= 900 })
	if n := srv.PacedBytes(); n != 900 {
		t.Fatalf("paced bytes %d, want 900", n)
	}
}

// TestTCPPacedStreamReceiverLeaves: a receiver that closes a stream
// whose sender waits for a slot (at 100 bytes a second, each chunk waits
// a second) frees the sender at its next keepalive (the receiver asks
// for one every 100 ms): its reader is closed, no goroutine stays.
func TestTCPPacedStreamReceiverLeaves(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	src.add("o", complete(pattern(10000)))
	_, cli, addr := tcpPair(t, src, TCPConfig{Pace: func() float64 { return 100 }}, TCPConfig{StallTimeout: 300 * time.Millisecond})
	s, err := OpenPaced(ctx, cli, "b", addr, "o", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.Next(ctx); err != nil || len(b) != 100 {
		t.Fatalf("first chunk: %d bytes, %v", len(b), err)
	}
	s.Close()
	eventually(t, "the sender closes its reader", func() bool { return src.openReaders() == 0 })
}
