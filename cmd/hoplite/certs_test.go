package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
)

// TestCertsCommand: hoplite certs writes a CA and a member certificate it
// signs (ECDSA P-256, a year, SANs for the hosts) that load as a mutual
// TLS config.
func TestCertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	code, stdout, stderr := hoplite(t, "certs", "--dir", dir, "--hosts", "127.0.0.1, node1.example,::1")
	if code != 0 {
		t.Fatalf("exit code %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "--tls-cert "+filepath.Join(dir, "member.pem")) {
		t.Fatalf("stdout does not say how to run members:\n%s", stdout)
	}
	read := func(name string) *x509.Certificate {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("%s: no PEM", name)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca, leaf := read("ca.pem"), read("member.pem")
	if !ca.IsCA {
		t.Fatal("ca.pem is not a CA")
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Fatalf("member.pem does not verify against ca.pem for %v: %v", usage, err)
		}
	}
	if k, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Fatalf("member key %T, want ECDSA P-256", leaf.PublicKey)
	}
	if life := leaf.NotAfter.Sub(time.Now()); life < 364*24*time.Hour || life > 366*24*time.Hour {
		t.Fatalf("member certificate valid for %v more, want a year", life)
	}
	if !slices.Equal(leaf.DNSNames, []string{"node1.example"}) || len(leaf.IPAddresses) != 2 ||
		!leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) || !leaf.IPAddresses[1].Equal(net.ParseIP("::1")) {
		t.Fatalf("SANs %v %v, want 127.0.0.1, ::1 and node1.example", leaf.DNSNames, leaf.IPAddresses)
	}
	if fi, err := os.Stat(filepath.Join(dir, "member-key.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("member-key.pem: %v %v, want mode 0600", fi, err)
	}
	if _, err := cluster.TLSConfig(filepath.Join(dir, "member.pem"), filepath.Join(dir, "member-key.pem"), filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := hoplite(t, "certs", "--hosts", "127.0.0.1"); code != 2 || !strings.Contains(stderr, "-dir") { // a usage error
		t.Fatalf("certs without --dir: exit %d, %s", code, stderr)
	}

	// --name: the same CA signs a certificate of another key.
	code, stdout, stderr = hoplite(t, "certs", "--dir", dir, "--hosts", "127.0.0.1", "--name", "node-2")
	if code != 0 || !strings.Contains(stdout, "--tls-cert "+filepath.Join(dir, "node-2.pem")) {
		t.Fatalf("certs --name: exit %d, %s%s", code, stdout, stderr)
	}
	other := read("node-2.pem")
	if _, err := other.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("node-2.pem does not verify against the same ca.pem: %v", err)
	}
	if other.PublicKey.(*ecdsa.PublicKey).Equal(leaf.PublicKey) || !read("ca.pem").Equal(ca) {
		t.Fatal("--name reused member.pem's key, or made a new CA")
	}
	if code, _, stderr := hoplite(t, "certs", "--dir", t.TempDir(), "--name", "x"); code == 0 || !strings.Contains(stderr, "ca.pem") {
		t.Fatalf("certs --name without a CA in the directory: exit %d, %s", code, stderr)
	}
	if code, _, _ := hoplite(t, "certs", "--dir", dir, "--name", "../x"); code != 2 {
		t.Fatalf("certs --name ../x: exit %d, want a usage error", code)
	}
}

// TestNodeTLSFlags: the TLS flags reach the member config, and a partial
// or unreadable set is a clear error before anything listens: a partial
// one a bad command line (exit 2), files that cannot serve exit 1.
func TestNodeTLSFlags(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key, err := cluster.GenerateCerts(dir, []string{"127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := hoplite(t, "node", "--bind", "127.0.0.1:1", "--tls-cert", cert, "--tls-ca", ca)
	if code != 2 || !strings.Contains(stderr, "INVALID_ARGUMENT") || !strings.Contains(stderr, "--tls-key") {
		t.Fatalf("a certificate without its key: exit %d: %s", code, stderr)
	}
	code, _, stderr = hoplite(t, "node", "--bind", "127.0.0.1:1", "--tls-cert", cert, "--tls-key", key, "--tls-ca", filepath.Join(dir, "missing.pem"))
	if code != 1 || !strings.Contains(stderr, "missing.pem") {
		t.Fatalf("a missing CA file: exit %d: %s", code, stderr)
	}
	code, _, stderr = hoplite(t, "node", "--bind", "127.0.0.1:1", "--tls-cert", ca, "--tls-key", key, "--tls-ca", ca)
	if code != 1 || !strings.Contains(stderr, "TLS certificate") {
		t.Fatalf("a certificate that does not match its key: exit %d: %s", code, stderr)
	}
}

// TestBenchP2PTLS runs `hoplite bench p2p --tls` (a built binary: the
// benchmark starts its peers from its own executable) on a small object:
// both pairs move the bytes and the TLS cost line is printed.
func TestBenchP2PTLS(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "bench", "p2p", "--size", "2MiB", "--reps", "2", "--small", "10", "--tls").CombinedOutput()
	if err != nil {
		t.Fatalf("bench p2p --tls: %v\n%s", err, out)
	}
	for _, want := range []string{"hoplite data plane           median", "hoplite over mTLS            median", "round trip, mTLS:", "TLS cost: 2 MiB Get median",
		"hoplite into a reused buffer median", "plain TCP, fresh", "plain TCP, reused", "both into fresh buffers:", "into a reused buffer:",
		"hoplite / plain TCP, both into one reused buffer:", "inline Get / round trip: p50", "inline Get / round trip, mTLS: p50"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("no %q in the output:\n%s", want, out)
		}
	}
}
