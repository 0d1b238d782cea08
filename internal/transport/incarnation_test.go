package transport

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// openCounter counts the objects a source was asked to open.
type openCounter struct {
	*ctlSource
	opens atomic.Int64
}

func (s *openCounter) OpenObject(ctx context.Context, id string) (ObjectReader, error) {
	s.opens.Add(1)
	return s.ctlSource.OpenObject(ctx, id)
}

// TestTCPRequestForAnotherIncarnation: a process that stopped and another
// that listens at the same port since are two incarnations of the
// address. A stream or a control request meant for the first (its data
// address, as a NodeRef or a shard table kept it) is answered UNAVAILABLE
// by the second, which neither opens the object nor runs the request;
// requests to the second's own address, or to the bare host:port, are
// served.
func TestTCPRequestForAnotherIncarnation(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	first := newTCP(t, TCPConfig{})
	old, err := first.Serve("node-a", newCtlSource())
	if err != nil {
		t.Fatal(err)
	}
	first.Close()
	// The next incarnation at the same host:port holds an object of the
	// same id, which the first one's callers would be served.
	src := &openCounter{ctlSource: newCtlSource()}
	src.add("o", complete(pattern(100)))
	second := newTCP(t, TCPConfig{ListenAddr: HostPort(old)})
	addr, err := second.Serve("node-a", src)
	if err != nil {
		t.Fatal(err)
	}
	if HostPort(addr) != HostPort(old) || addr == old {
		t.Fatalf("second endpoint at %q, the first at %q: want the same host:port, another incarnation", addr, old)
	}
	cli := newTCP(t, TCPConfig{})

	s, err := cli.Open(ctx, "", old, "o", 0, 10)
	if err == nil {
		s.Close()
		t.Fatal("a stream meant for the stopped endpoint was served by the one at its port now")
	}
	if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("a stream for the stopped endpoint = %v, want UNAVAILABLE naming another incarnation", err)
	}
	if _, err := cli.Call(ctx, old, 'e', []byte("hi")); !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("a control request for the stopped endpoint = %v, want UNAVAILABLE naming another incarnation", err)
	}
	if n, c := src.opens.Load(), src.calls.Load(); n != 0 || c != 0 {
		t.Fatalf("the endpoint at the port now opened %d objects and ran %d control requests meant for the stopped one", n, c)
	}

	// Its own address, and the bare port, are served by it.
	for _, a := range []string{addr, HostPort(addr)} {
		s, err := cli.Open(ctx, "", a, "o", 0, 100)
		if err != nil {
			t.Fatalf("open at %s: %v", a, err)
		}
		drain(t, ctx, s, 100)
		s.Close()
		if got, err := cli.Call(ctx, a, 'e', []byte("hi")); err != nil || string(got) != "ehi" {
			t.Fatalf("call at %s = %q, %v", a, got, err)
		}
	}
	if n, c := src.opens.Load(), src.calls.Load(); n != 2 || c != 2 {
		t.Fatalf("%d opens and %d control requests served, want 2 and 2", n, c)
	}
	// A data address that names an incarnation wrongly is refused here.
	if _, err := cli.Call(ctx, HostPort(addr)+"#xyz", 'e', nil); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a call to a malformed data address = %v, want INVALID_ARGUMENT", err)
	}
}
