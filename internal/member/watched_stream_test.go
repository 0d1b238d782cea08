package member

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// chunkStream serves data in chunks of 3 bytes, and counts the reads
// that copied them into the caller's memory (NextInto).
type chunkStream struct {
	data  []byte
	off   int
	into  int
	nexts int
}

func (s *chunkStream) Size() int64 { return int64(len(s.data)) }
func (s *chunkStream) Close()      {}
func (s *chunkStream) Next(context.Context) ([]byte, error) {
	s.nexts++
	if s.off == len(s.data) {
		return nil, io.EOF
	}
	b := s.data[s.off:min(s.off+3, len(s.data))]
	s.off += len(b)
	return b, nil
}

func (s *chunkStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	s.into++
	s.nexts-- // the Next below is this read's own
	b, err := s.Next(ctx)
	return copy(dst, b), err
}

type fakeTransport struct {
	transport.Transport
	s *chunkStream
}

func (f fakeTransport) Open(context.Context, string, string, string, int64, int) (transport.Stream, error) {
	return f.s, nil
}

// The failure-watching wrapper keeps the transport's receive-into path
// (a fetch then lands each chunk in the object's buffer without a copy):
// its NextInto is the stream's, not a Next and a copy; and it counts the
// bytes either way.
func TestWatchedStreamKeepsReceiveInto(t *testing.T) {
	for _, into := range []bool{true, false} {
		m := newMemberMetrics(&Member{})
		inner := &chunkStream{data: []byte("0123456789")}
		w := &watchedTransport{Transport: fakeTransport{s: inner}, report: func(string, error) {}, metrics: m,
			peerOf: func(string) string { return "peer" }}
		s, err := w.Open(t.Context(), "self", "addr", "x", 0, 3)
		if err != nil {
			t.Fatal(err)
		}
		var got []byte
		for {
			var n int
			var err error
			if into {
				buf := make([]byte, 3)
				n, err = s.NextInto(t.Context(), buf)
				got = append(got, buf[:n]...)
			} else {
				var b []byte
				b, err = s.Next(t.Context())
				got = append(got, b...)
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != "0123456789" {
			t.Errorf("into=%v: read %q", into, got)
		}
		if into && (inner.into != 5 || inner.nexts != 0) {
			t.Errorf("the wrapper's NextInto made %d NextInto and %d Next calls on the stream, want 5 and 0", inner.into, inner.nexts)
		}
		if n := testutil.ToFloat64(m.received.WithLabelValues("peer")); n != 10 {
			t.Errorf("into=%v: %v bytes counted, want 10", into, n)
		}
	}
}

// A crashed member's data plane opens nothing and calls nobody: its
// actors run on for a moment while they are stopped, and a Locate one of
// them sent on the data plane after every member had delivered its
// failure made a shard record the dead member as a copy and hand it to
// the next receiver as its sender (TestFigure4BroadcastFailover, about 1
// run in 10 under load). It does not report its peers as suspects either:
// it is the one that is gone.
func TestCrashedMembersDataPlaneRefusesItsOwnRequests(t *testing.T) {
	var down, opened bool
	var reported []string
	w := &watchedTransport{Transport: countingOpens{opened: &opened}, metrics: newMemberMetrics(&Member{}),
		report: func(addr string, _ error) { reported = append(reported, addr) },
		peerOf: func(string) string { return "peer" }, down: func() bool { return down }}
	if _, err := w.Open(t.Context(), "self", "addr", "x", 0, 3); err != nil || !opened {
		t.Fatalf("a live member's Open: %v (opened %v)", err, opened)
	}
	down, opened = true, false
	if _, err := w.Open(t.Context(), "self", "addr", "x", 0, 3); !errors.Is(err, messages.ErrUnavailable) || opened {
		t.Fatalf("a crashed member's Open: %v (reached the transport: %v), want UNAVAILABLE", err, opened)
	}
	if _, err := w.OpenPaced(t.Context(), "self", "addr", "x", 0, 3); !errors.Is(err, messages.ErrUnavailable) || opened {
		t.Fatalf("a crashed member's OpenPaced: %v (reached the transport: %v), want UNAVAILABLE", err, opened)
	}
	if _, err := w.Call(t.Context(), "addr", messages.ControlLocate, nil); !errors.Is(err, messages.ErrUnavailable) || opened {
		t.Fatalf("a crashed member's Call: %v (reached the transport: %v), want UNAVAILABLE", err, opened)
	}
	if len(reported) != 0 {
		t.Fatalf("a crashed member suspected its peers: %v", reported)
	}
}

// countingOpens is a transport (and control caller) that notes being used.
type countingOpens struct {
	transport.Transport
	opened *bool
}

func (c countingOpens) Open(context.Context, string, string, string, int64, int) (transport.Stream, error) {
	*c.opened = true
	return &chunkStream{data: []byte("0123456789")}, nil
}

func (c countingOpens) Call(context.Context, string, byte, []byte) ([]byte, error) {
	*c.opened = true
	return nil, nil
}
