package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/testutil"
)

// TestInsecureLoopbackHost: what counts as this machine only. Wildcards
// and names other than localhost do not: they may be reached from
// anywhere.
func TestInsecureLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": true, "127.0.0.2": true, "127.255.255.254": true, "::1": true, "::ffff:127.0.0.1": true,
		"localhost": true, "LocalHost": true,
		"0.0.0.0": false, "::": false, "": false, "10.1.2.3": false, "198.18.0.1": false, "192.0.2.1": false,
		"fe80::1": false, "128.0.0.1": false, "hoplite-1.example.com": false, "localhost.example.com": false,
	} {
		if got := loopbackHost(host); got != want {
			t.Errorf("loopbackHost(%q) = %v, want %v", host, got, want)
		}
	}
	for addr, want := range map[string]bool{
		"127.0.0.2:7000": true, "[::1]:7000": true, "localhost:7000": true,
		"0.0.0.0:7000": false, "[::]:7000": false, ":7000": false, "198.18.0.1:20000": false,
		"nonsense": true, // not judged: the member's configuration refuses it
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestInsecureCheck: plaintext beyond this machine (a listener or the
// etcd connection) is refused with the flags that fix it, or with
// --insecure accepted with one warning naming what is exposed; TLS on the
// side concerned needs neither.
func TestInsecureCheck(t *testing.T) {
	tls := []string{"-tls-cert", "m.pem", "-tls-key", "k.pem", "-tls-ca", "ca.pem"}
	etcd := func(addr string) []string { return []string{"-provider", "etcd", "-provider-address", addr} }
	join := func(parts ...[]string) []string {
		var out []string
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		args    []string
		refused []string // what the error names ("": accepted)
		warned  string   // what the warning names ("": no warning)
	}{
		{args: []string{"-bind", "127.0.0.2:7000"}},
		{args: []string{"-bind", "localhost:7000", "-data-bind", "127.0.0.1:0"}},
		{args: []string{"-bind", "[::1]:7000", "-insecure"}},
		{args: []string{"-bind", "10.1.2.3:7000"}, refused: []string{"--bind 10.1.2.3:7000", "--tls-cert", "--tls-key", "--tls-ca", "hoplite certs", "--insecure"}},
		{args: []string{"-bind", "127.0.0.1:7000", "-data-bind", "0.0.0.0:0"}, refused: []string{"--data-bind 0.0.0.0:0", "--tls-cert"}},
		{args: []string{"-bind", "10.1.2.3:7000", "-insecure"}, warned: "--bind 10.1.2.3:7000"},
		{args: join([]string{"-bind", "10.1.2.3:7000"}, tls)},
		{args: join([]string{"-bind", "10.1.2.3:7000", "-data-bind", "10.1.2.3:7100"}, tls, []string{"-insecure"})},
		{args: join([]string{"-bind", "127.0.0.1:7000"}, etcd("10.0.0.5:2379")), refused: []string{"--provider-address 10.0.0.5:2379", "--etcd-ca", "--etcd-cert", "--insecure"}},
		{args: join([]string{"-bind", "10.1.2.3:7000"}, tls, etcd("10.0.0.5:2379")), refused: []string{"--provider-address 10.0.0.5:2379", "--etcd-ca"}},
		{args: join([]string{"-bind", "10.1.2.3:7000"}, etcd("10.0.0.5:2379")), refused: []string{"--bind 10.1.2.3:7000", "--provider-address 10.0.0.5:2379", "--tls-cert", "--etcd-ca"}},
		{args: join([]string{"-bind", "127.0.0.1:7000", "-insecure"}, etcd("10.0.0.5:2379")), warned: "--provider-address 10.0.0.5:2379"},
		{args: join([]string{"-bind", "127.0.0.1:7000", "-etcd-ca", "etcd-ca.pem"}, etcd("10.0.0.5:2379"))},
		{args: join([]string{"-bind", "127.0.0.1:7000"}, etcd(""))}, // the default, 127.0.0.1:2379
		// The automanaged provider has no etcd connection to judge.
		{args: []string{"-bind", "127.0.0.1:7000", "-provider-address", "10.0.0.5:2379"}},
	} {
		name := strings.Join(c.args, " ")
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f nodeFlags
		f.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		log, hook := logtest.NewNullLogger()
		err := f.checkPlaintext(log)
		var ue usageError
		switch {
		case c.refused == nil && err != nil:
			t.Errorf("%s: refused: %v", name, err)
		case c.refused != nil && !errors.As(err, &ue):
			t.Errorf("%s: %v, want a usage error", name, err)
		case c.refused != nil:
			for _, w := range c.refused {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %q does not name %q", name, err, w)
				}
			}
			if !slices.Contains(c.refused, "--tls-cert") && strings.Contains(err.Error(), "--tls-cert") {
				t.Errorf("%s: %q asks for member TLS, which is there", name, err)
			}
		}
		entries := hook.AllEntries()
		if c.warned == "" && len(entries) > 0 {
			t.Errorf("%s: logged %q", name, entries[0].Message)
		}
		if c.warned != "" && (len(entries) != 1 || entries[0].Level != logrus.WarnLevel ||
			entries[0].Data["plaintext"] != c.warned ||
			strings.HasPrefix(c.warned, "--bind") != strings.Contains(entries[0].Message, "directory shards") ||
			strings.HasPrefix(c.warned, "--provider-address") != strings.Contains(entries[0].Message, "membership")) {
			t.Errorf("%s: logged %v, want one warning naming %s", name, entries, c.warned)
		}
	}
}

// TestInsecureNode: `hoplite node` on an address that is not loopback
// (192.0.2.1, a documentation address no host has, so nothing listens or
// is dialled) exits 2 before starting without TLS, naming the flags; with
// --insecure it passes the check, warns at warn naming the address, and
// gets as far as binding, which fails (exit 1); with TLS it gets as far
// without a warning.
func TestInsecureNode(t *testing.T) {
	port := testutil.FreePorts(t, 1)[0]
	bind := fmt.Sprintf("192.0.2.1:%d", port)
	code, stdout, stderr := hoplite(t, "node", "--bind", bind, "--join-timeout", "5s")
	if code != 2 || stdout != "" {
		t.Fatalf("no TLS: exit %d, stdout %q, want 2 and nothing", code, stdout)
	}
	for _, w := range []string{"refusing plaintext", "--bind " + bind, "--tls-cert", "--tls-key", "--tls-ca", "hoplite certs", "--insecure"} {
		if !strings.Contains(stderr, w) {
			t.Errorf("no TLS: stderr does not say %q:\n%s", w, stderr)
		}
	}

	code, _, stderr = hoplite(t, "node", "--bind", bind, "--insecure", "--join-timeout", "5s")
	if code != 1 || strings.Contains(stderr, "refusing plaintext") || !strings.Contains(stderr, "level=warning") ||
		!strings.Contains(stderr, "--insecure: plaintext beyond this machine") || !strings.Contains(stderr, bind) {
		t.Fatalf("--insecure: exit %d, want 1 (the address is not this host's) after a warning naming %s:\n%s", code, bind, stderr)
	}

	dir := t.TempDir()
	ca, cert, key, err := cluster.GenerateCerts(filepath.Join(dir, "tls"), []string{"192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr = hoplite(t, "node", "--bind", bind, "--tls-cert", cert, "--tls-key", key, "--tls-ca", ca, "--join-timeout", "5s")
	if code != 1 || strings.Contains(stderr, "refusing plaintext") || strings.Contains(stderr, "--insecure") {
		t.Fatalf("TLS: exit %d, want 1 (the address is not this host's) without a refusal or a warning:\n%s", code, stderr)
	}
}
