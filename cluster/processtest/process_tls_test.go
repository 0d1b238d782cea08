package processtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// newTLSClient is a test client whose actor system talks to the members
// over mutual TLS with cfg (RemoteConfig, as a client program would).
func newTLSClient(t *testing.T, cfg *tls.Config) *testClient {
	t.Helper()
	ports := freePorts(t, 1)
	log := logrus.New()
	log.SetOutput(io.Discard)
	system := actor.NewActorSystem(actor.WithLoggerFactory(quietSlog))
	r := remote.NewRemote(system, cluster.RemoteConfig("127.0.0.1", ports[0], cfg, log))
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("start the TLS test client: %v", p)
			}
		}()
		r.Start()
	}()
	t.Cleanup(func() {
		r.Shutdown(false)
		system.Shutdown()
	})
	return &testClient{system: system}
}

// dataAddress is the data plane address from a member's start line.
func (p *nodeProc) dataAddress(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if m := startLine.FindStringSubmatch(line); m != nil {
			return m[3]
		}
	}
	t.Fatalf("no start line from %s", p.slot.bind)
	return ""
}

// refusals counts a member's warnings of refused TLS handshakes on a port
// kind ("manage", "remote"; the data plane's carry no port field).
func (p *nodeProc) refusals(kind string) int {
	n := 0
	for _, e := range p.logs() {
		if !strings.HasPrefix(e.str("msg"), "refused a connection: TLS handshake failed") || e.str("peer") == "" {
			continue
		}
		switch {
		case kind == "data" && strings.Contains(e.str("error"), "TLS handshake on data port"):
			n++
		case kind != "data" && strings.HasPrefix(e.str("port"), kind+" "):
			n++
		}
	}
	return n
}

func int32s(vals []int32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// TestProcessTLS: three `hoplite node` processes with certificates of one
// CA work end to end over mutual TLS (a multi-MiB Put/Get across the data
// plane, a Reduce, a barrier through NewBarrierClient); a process without
// a certificate or with one of another CA cannot join (a clear error, a
// non-zero exit within its join timeout), cannot read an object from a
// data port and cannot call the manage endpoints, and the members log
// each refusal with the peer.
func TestProcessTLS(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	bin := hopliteBinary(t)
	ca, cert, key, fca, fcert, fkey := clusterAndForeignCerts(t)
	tlsFlags := []string{"-tls-cert", cert, "-tls-key", key, "-tls-ca", ca}
	slots, seeds := memberSlots(t, 5)
	var nodes []*nodeProc
	for i := range 3 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, tlsFlags...))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	ccfg, fcfg := clientTLS(t, cert, key, ca), clientTLS(t, fcert, fkey, fca)
	c := newTLSClient(t, ccfg)
	view := c.converge(t, nodes...)

	// ---- end to end: a 6 MiB object crosses the data plane twice.
	data := randomBytes(16, 6<<20+123)
	id := idOwnedBy(t, view, nodes[0].id, "tls-obj")
	putRetry(t, c.of(nodes[0]), id, data)
	for _, n := range nodes[1:] {
		getExact(t, c.of(n), id, data)
	}

	// A Reduce of three 256 KiB int32 sources, one per member.
	const elems = 64 << 10
	var sources []string
	want := make([]int32, elems)
	for i, n := range nodes {
		vals := make([]int32, elems)
		for j := range vals {
			vals[j] = int32(j*(i+1) + i)
			want[j] += vals[j]
		}
		src := fmt.Sprintf("tls-src-%d", i)
		putRetry(t, c.of(n), src, int32s(vals))
		sources = append(sources, src)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := c.of(nodes[0]).Reduce(ctx, "tls-sum", sources, 3, messages.ReduceOp_SUM, messages.DType_INT32); err != nil {
		t.Fatalf("reduce over TLS: %v", err)
	}
	getExact(t, c.of(nodes[2]), "tls-sum", int32s(want))

	// A barrier through NewBarrierClient on the TLS client's system.
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.address)
	}
	bc := cluster.NewBarrierClient(c.system, addrs...)
	if _, err := barrier.New(ctx, bc, "tls-barrier", barrier.Max(3)); err != nil {
		t.Fatalf("barrier over TLS: %v", err)
	}
	for l, reason := range enterEach(ctx, t, bc, "tls-barrier", "a", "b", "c") {
		if reason != "max" {
			t.Fatalf("%s passed with %q, want max", l, reason)
		}
	}

	// A client that is not a member (Dial) with the cluster's certificate
	// sees the members and reads the object; without one, it is refused.
	dc, err := cluster.Dial(ctx, nodes[1].address, cluster.WithTLS(ccfg))
	if err != nil {
		t.Fatalf("dial over TLS: %v", err)
	}
	defer dc.Close()
	if ms, err := dc.Members(ctx); err != nil || len(ms) != 3 {
		t.Fatalf("members over TLS: %v %v", ms, err)
	}
	if got, err := dc.Get(ctx, "tls-sum"); err != nil || !bytes.Equal(got, int32s(want)) {
		t.Fatalf("get over a dialed TLS client: %d bytes, %v", len(got), err)
	}
	// Its Puts' and Gets' bytes take the data plane, mutual TLS both
	// ways: the member fetches a Put from the client's endpoint, and a
	// Get streams from the member's.
	blob := randomBytes(21, 6<<20+1)
	if err := dc.PutFrom(ctx, "tls-blob", bytes.NewReader(blob), -1); err != nil {
		t.Fatalf("put over a dialed TLS client: %v", err)
	}
	var back bytes.Buffer
	if n, err := dc.GetTo(ctx, "tls-blob", &back); err != nil || n != int64(len(blob)) || !bytes.Equal(back.Bytes(), blob) {
		t.Fatalf("get into a writer over a dialed TLS client: %d bytes, %v", n, err)
	}
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	if _, err := cluster.Dial(pctx, nodes[1].address); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a plaintext Dial of a TLS cluster: %v, want UNAVAILABLE", err)
	}
	pcancel()

	// ---- outsiders cannot join: no certificate, and another CA's.
	for _, tc := range []struct {
		name  string
		slot  memberSlot
		flags []string
		want  string
	}{
		{"no certificate", slots[3], nil, "requires mutual TLS"},
		{"foreign CA", slots[4], []string{"-tls-cert", fcert, "-tls-key", fkey, "-tls-ca", fca}, "TLS handshake failed"},
	} {
		p := startNode(t, bin, tc.slot, seeds, append([]string{"-join-timeout", "10s"}, tc.flags...)...)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second): // the join timeout, with room for a loaded host
			t.Fatalf("%s: the outsider still runs 30 s after it started (join timeout 10 s)", tc.name)
		}
		var exit *exec.ExitError
		if !errors.As(p.exitErr, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("%s: the outsider exited with %v, want a non-zero exit", tc.name, p.exitErr)
		}
		if out := p.stderr.String(); !strings.Contains(out, tc.want) || !strings.Contains(out, "manage port") {
			t.Fatalf("%s: the outsider's error does not say %q on the manage port:\n%s", tc.name, tc.want, tail(out, 10))
		}
		if strings.Contains(p.stdout.String(), "hoplite node ") {
			t.Fatalf("%s: the outsider printed a start line: %s", tc.name, p.stdout.String())
		}
	}
	if got := c.converge(t, nodes...); len(got) != 3 {
		t.Fatalf("view %v after the outsiders", got)
	}

	// ---- the data port: a client of the cluster reads the object (the
	// control), outsiders get no object byte.
	daddr := nodes[0].dataAddress(t)
	readObject := func(cfg *tls.Config) ([]byte, error) {
		tr := transport.NewTCP(transport.TCPConfig{TLS: cfg, DialTimeout: 5 * time.Second})
		defer tr.Close()
		octx, ocancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer ocancel()
		s, err := tr.Open(octx, "outsider", daddr, id, 0, 1<<20)
		if err != nil {
			return nil, err
		}
		defer s.Close()
		var got []byte
		for {
			b, err := s.Next(octx)
			if err == io.EOF {
				return got, nil
			}
			if err != nil {
				return got, err
			}
			got = append(got, b...)
		}
	}
	if got, err := readObject(ccfg); err != nil || len(got) != len(data) {
		t.Fatalf("the cluster's client read %d bytes from the data port (err %v), want %d", len(got), err, len(data))
	}
	if got, err := readObject(fcfg); err == nil || len(got) > 0 {
		t.Fatalf("a foreign certificate read %d bytes from the data port (err %v)", len(got), err)
	} else if !strings.Contains(err.Error(), "TLS") || !strings.Contains(err.Error(), daddr) {
		t.Fatalf("a foreign certificate's error does not name TLS and the data port %s: %v", daddr, err)
	}
	if got, err := readObject(nil); err == nil || len(got) > 0 {
		t.Fatalf("a plaintext client read %d bytes from the data port (err %v)", len(got), err)
	}
	noCert := ccfg.Clone()
	noCert.Certificates = nil
	if got, err := readObject(noCert); err == nil || len(got) > 0 {
		t.Fatalf("a TLS client without a certificate read %d bytes from the data port (err %v)", len(got), err)
	}

	// ---- the manage port: /_health only for the cluster's certificates.
	health := func(scheme string, cfg *tls.Config) error {
		cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer cl.CloseIdleConnections()
		resp, err := cl.Get(scheme + "://" + nodes[0].slot.manage + "/_health")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), nodes[0].id) {
			return fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		return nil
	}
	if err := health("https", ccfg); err != nil {
		t.Fatalf("/_health with the cluster's certificate: %v", err)
	}
	if err := health("http", nil); err == nil {
		t.Fatal("/_health over plain HTTP answered")
	}
	if err := health("https", fcfg); err == nil {
		t.Fatal("/_health with a foreign certificate answered")
	}
	if err := health("https", noCert); err == nil {
		t.Fatal("/_health without a client certificate answered")
	}

	// ---- remote: an actor system without the cluster's certificate gets
	// no answer from a member.
	if _, err := newTLSClient(t, fcfg).view(nodes[0]); err == nil {
		t.Fatal("a member answered an actor system with a foreign certificate on its remote port")
	}
	if _, err := newTestClient(t).view(nodes[0]); err == nil {
		t.Fatal("a member answered a plaintext actor system on its remote port")
	}

	// ---- the refusing side logged the refusals with the peer's address
	// (the data plane one line per source every 5 s: a flood of bad
	// handshakes cannot flood its log).
	testutil.Eventually(t, 20*time.Second, "the member logs refusals on its manage, data and remote ports", func() bool {
		return nodes[0].refusals("manage") >= 3 && nodes[0].refusals("data") >= 1 && nodes[0].refusals("remote") >= 1
	})
	// The cluster still works.
	getExact(t, c.of(nodes[1]), "tls-sum", int32s(want))
}

// clusterAndForeignCerts makes the cluster's certificates and another
// CA's (a client the cluster must refuse), each for 127.0.0.1.
func clusterAndForeignCerts(t *testing.T) (ca, cert, key, fca, fcert, fkey string) {
	t.Helper()
	dir := t.TempDir()
	ca, cert, key, err := cluster.GenerateCerts(filepath.Join(dir, "cluster"), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	fca, fcert, fkey, err = cluster.GenerateCerts(filepath.Join(dir, "foreign"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	return ca, cert, key, fca, fcert, fkey
}

// clientTLS is a client's TLS configuration from a certificate, its key
// and the CA it trusts.
func clientTLS(t *testing.T, cert, key, ca string) *tls.Config {
	t.Helper()
	cfg, err := cluster.TLSConfig(cert, key, ca)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
