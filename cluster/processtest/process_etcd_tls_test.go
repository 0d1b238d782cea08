package processtest

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/etcdtest"
)

// TestProcessEtcdTLS: `hoplite node` with --etcd-cert, --etcd-key and
// --etcd-ca joins through an etcd server that serves only TLS and
// requires a client certificate its own CA signed: two members find each
// other there. A member without those flags exits non-zero, saying the
// server requires TLS and naming the flags.
func TestProcessEtcdTLS(t *testing.T) {
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	srv := etcdtest.StartTLS(t)
	f := srv.TLS()
	bin := hopliteBinary(t)
	slots, _ := memberSlots(t, 3)
	withTLS := []string{"-etcd-cert", f.Cert, "-etcd-key", f.Key, "-etcd-ca", f.CA}
	a := startEtcdNode(t, bin, slots[0], srv.Endpoint(), withTLS...)
	b := startEtcdNode(t, bin, slots[1], srv.Endpoint(), withTLS...)
	for _, n := range []*nodeProc{a, b} {
		n.waitStarted(t, 60*time.Second)
	}
	newTestClient(t).converge(t, a, b)

	plain := startEtcdNode(t, bin, slots[2], srv.Endpoint(), "-join-timeout", "3s")
	select {
	case <-plain.exited:
	case <-time.After(60 * time.Second):
		t.Fatal("a member without etcd TLS did not exit")
	}
	out := plain.stderr.String()
	if plain.exitErr == nil || !strings.Contains(out, "etcd server at "+srv.Endpoint()) ||
		!strings.Contains(out, "requires TLS") || !strings.Contains(out, "--etcd-ca") {
		t.Fatalf("a member without etcd TLS: exit %v: %s", plain.exitErr, tail(out, 5))
	}
}
