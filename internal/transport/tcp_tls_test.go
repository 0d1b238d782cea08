package transport

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/messages"
)

func tlsConfig(t *testing.T) *tls.Config {
	t.Helper()
	f, err := certs.Generate(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := certs.Config(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// refusals collects the connections a TLS data port refused.
type refusals struct {
	mu   sync.Mutex
	errs []string
}

func (r *refusals) add(peer string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, peer+": "+err.Error())
}

func (r *refusals) has(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if strings.Contains(e, sub) {
			return true
		}
	}
	return false
}

// TestTCPTLS: members with certificates of one CA stream objects over
// mutual TLS; a client without a certificate, with one of another CA, or
// speaking plaintext gets no object byte, and both sides say why.
func TestTCPTLS(t *testing.T) {
	noLeaks(t)
	ctx := guardCtx(t)
	src := newFakeSource()
	data := pattern(3 << 20)
	src.add("o", complete(data))
	cluster := tlsConfig(t)
	var ref refusals
	srv, cli, addr := tcpPair(t, src, TCPConfig{TLS: cluster, Refused: ref.add}, TCPConfig{TLS: cluster})

	s, err := cli.Open(ctx, "b", addr, "o", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for {
		b, err := s.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, b...)
	}
	s.Close()
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes over TLS, not the object", len(got))
	}

	// A member of another cluster (another CA) is refused: the handshake
	// fails on both sides, typed on the dialer's.
	foreign := newTCP(t, TCPConfig{TLS: tlsConfig(t)})
	_, err = foreign.Open(ctx, "c", addr, "o", 0, 1<<20)
	if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "TLS") || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open with a foreign certificate = %v, want UNAVAILABLE naming the data port and TLS", err)
	}

	// A plaintext client (no certificate at all) is refused too.
	plain := newTCP(t, TCPConfig{})
	if s, err := plain.Open(ctx, "d", addr, "o", 0, 1<<20); err == nil {
		s.Close()
		t.Fatal("a plaintext client opened a stream on a TLS data port")
	}

	// A raw request gets no object bytes back: the reply is not a frame
	// holding the pattern.
	nc, err := net.DialTimeout("tcp", HostPort(addr), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	req := encodeRequest("o", 0, 1<<20, 0, false, 0)
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	nc.Write(req)
	reply, _ := io.ReadAll(nc)
	nc.Close()
	if bytes.Contains(reply, data[:64]) {
		t.Fatal("a plaintext request read object bytes from a TLS data port")
	}

	// A TLS client without a certificate: the handshake is refused.
	noCert := cluster.Clone()
	noCert.Certificates = nil
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", HostPort(addr), noCert)
	if err == nil {
		tc.SetDeadline(time.Now().Add(10 * time.Second))
		tc.Write(req)
		reply, err = io.ReadAll(tc)
		tc.Close()
		if err == nil || bytes.Contains(reply, data[:64]) {
			t.Fatalf("a client without a certificate read %d bytes (err %v)", len(reply), err)
		}
	}
	// Refusals are logged one a source per interval (the others counted):
	// whichever of the three came first names the peer and the reason.
	eventually(t, "the server logs a refusal with the peer and the reason, and counts each", func() bool {
		return ref.has("TLS handshake on data port "+addr+": ") && ref.has("127.0.0.1:") && srv.Stats().HandshakeFailures >= 3
	})
}
