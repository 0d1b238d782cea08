package member

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/etcdtest"
	"github.com/hoplite-go/hoplite/messages"
)

// etcdPlaintextWarning is what a member running TLS logs when its etcd
// connection is plaintext.
const etcdPlaintextWarning = "the connection to etcd is plaintext though the member runs TLS"

// TestEtcdTLSMembers: members running mutual TLS with their cluster's CA
// join through an etcd server that requires client certificates signed by
// another CA (etcd's), see each other and move an object; neither warns
// of a plaintext etcd connection.
func TestEtcdTLSMembers(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	etcdFiles := srv.TLS()
	ca, cert, key, err := GenerateCerts(filepath.Join(t.TempDir(), "cluster"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if ca == etcdFiles.CA {
		t.Fatal("the cluster's CA is etcd's: the test would not show that they are configured apart")
	}
	log := logrus.New()
	log.SetLevel(logrus.InfoLevel)
	log.SetOutput(&syncBuffer{})
	hook := logtest.NewLocal(log)
	slots, _ := memberSlots(t, 2)
	mod := func(c *MemberConfig) {
		c.Provider, c.ProviderAddress = ProviderEtcd, srv.Endpoint()
		c.TLSCert, c.TLSKey, c.TLSCA = cert, key, ca
		c.EtcdCert, c.EtcdKey, c.EtcdCA = etcdFiles.Cert, etcdFiles.Key, etcdFiles.CA
	}
	a, err := joinSlot(t, slots[0], nil, log, mod)
	if err != nil {
		t.Fatal(err)
	}
	b, err := joinSlot(t, slots[1], nil, log, mod)
	if err != nil {
		t.Fatal(err)
	}
	waitSameView(t, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	data := randomBytes(43, 100<<10)
	if err := a.Client().Put(ctx, "etcd-tls", data); err != nil {
		t.Fatal(err)
	}
	got, err := b.Client().Get(ctx, "etcd-tls")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get through the TLS cluster: %d bytes, %v", len(got), err)
	}
	for _, e := range hook.AllEntries() {
		if strings.HasPrefix(e.Message, etcdPlaintextWarning) {
			t.Fatalf("a member with etcd TLS logged %q", e.Message)
		}
	}
}

// TestEtcdTLSRefusesPlaintext: the TLS etcd server of TestEtcdTLSMembers
// refuses what has no certificate it trusts, so that test's join did go
// through TLS: a plaintext etcd client gets no answer to a Status request;
// a member without the etcd TLS flags fails its join with an error that
// names them; one with etcd's CA but no client certificate fails on the
// handshake.
func TestEtcdTLSRefusesPlaintext(t *testing.T) {
	srv := etcdtest.StartTLS(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = cli.Status(ctx, srv.Endpoint())
	cancel()
	if err == nil {
		t.Fatal("a plaintext client was answered by the TLS etcd server")
	}

	slots, _ := memberSlots(t, 2)
	join := func(slot memberSlot, mod func(*MemberConfig)) error {
		cfg := MemberConfig{Bind: slot.bind, ManagePort: slot.managePort(), Provider: ProviderEtcd,
			ProviderAddress: srv.Endpoint(), JoinTimeout: 3 * time.Second, Log: quietLog()}
		mod(&cfg)
		m, err := Join(context.Background(), cfg)
		if err == nil {
			m.Stop()
			return errors.New("joined")
		}
		return err
	}
	err = join(slots[0], func(*MemberConfig) {})
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Address != srv.Endpoint() || !errors.Is(err, messages.ErrUnavailable) ||
		!strings.Contains(err.Error(), "requires TLS") || !strings.Contains(err.Error(), "--etcd-ca") {
		t.Fatalf("plaintext member: %v, want a *ProviderError saying the server requires TLS", err)
	}
	err = join(slots[1], func(c *MemberConfig) { c.EtcdCA = srv.TLS().CA })
	if !errors.As(err, &pe) || !strings.Contains(pe.Op, "TLS handshake") || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("member without a client certificate: %v, want a refused TLS handshake", err)
	}
}

// TestEtcdPlaintextWarns: a member running TLS that registers in a
// plaintext etcd says at warn that the etcd connection is plaintext, and
// names the flags that fix it.
func TestEtcdPlaintextWarns(t *testing.T) {
	srv := etcdtest.Start(t)
	ca, cert, key, err := GenerateCerts(filepath.Join(t.TempDir(), "cluster"), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.InfoLevel)
	log.SetOutput(&syncBuffer{})
	hook := logtest.NewLocal(log)
	slots, _ := memberSlots(t, 1)
	if _, err := joinSlot(t, slots[0], nil, log, func(c *MemberConfig) {
		c.Provider, c.ProviderAddress = ProviderEtcd, srv.Endpoint()
		c.TLSCert, c.TLSKey, c.TLSCA = cert, key, ca
	}); err != nil {
		t.Fatal(err)
	}
	var warned bool
	for _, e := range hook.AllEntries() {
		if strings.HasPrefix(e.Message, etcdPlaintextWarning) {
			warned = e.Level == logrus.WarnLevel && strings.Contains(e.Message, "--etcd-ca")
		}
	}
	if !warned {
		t.Fatal("no warning at warn that the etcd connection is plaintext")
	}
}

// TestEtcdTLSConfig: the etcd TLS fields are checked before anything
// starts, as INVALID_ARGUMENT errors that name the flags.
func TestEtcdTLSConfig(t *testing.T) {
	f, err := certs.Generate(t.TempDir(), []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mod  func(*MemberConfig)
		want string // "" : accepted
	}{
		{"all three", func(c *MemberConfig) { c.EtcdCert, c.EtcdKey, c.EtcdCA = f.Cert, f.Key, f.CA }, ""},
		{"the CA only", func(c *MemberConfig) { c.EtcdCA = f.CA }, ""},
		{"a certificate without its key", func(c *MemberConfig) { c.EtcdCert, c.EtcdCA = f.Cert, f.CA }, "needs its key"},
		{"a missing CA", func(c *MemberConfig) { c.EtcdCA = filepath.Join(t.TempDir(), "missing.pem") }, "missing.pem"},
		{"a key that is not the certificate's", func(c *MemberConfig) { c.EtcdCert, c.EtcdKey = f.CA, f.Key }, "TLS certificate"},
		{"the automanaged provider", func(c *MemberConfig) { c.Provider, c.EtcdCA = ProviderAutomanaged, f.CA }, "for the etcd provider"},
	} {
		cfg := MemberConfig{Bind: "127.0.0.1:7000", Provider: ProviderEtcd, Log: quietLog()}
		c.mod(&cfg)
		got, _, _, err := cfg.withDefaults()
		switch {
		case c.want == "" && (err != nil || got.etcdTLS == nil):
			t.Errorf("%s: %v, want etcd TLS on", c.name, err)
		case c.want != "" && (!errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "--etcd-")):
			t.Errorf("%s: %v, want INVALID_ARGUMENT saying %q and naming the flags", c.name, err, c.want)
		}
	}
	got, _, _, err := MemberConfig{Bind: "127.0.0.1:7000", Provider: ProviderEtcd, Log: quietLog()}.withDefaults()
	if err != nil || got.etcdTLS != nil {
		t.Errorf("no etcd TLS fields: %v, TLS %v; want plaintext", err, got.etcdTLS != nil)
	}
}
