package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestProbeExitStatus(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/_health" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tc := range []struct {
		name   string
		status int
		args   []string
		want   int
	}{
		{"200", http.StatusOK, []string{"--url", srv.URL + "/_health"}, 0},
		{"starting", http.StatusServiceUnavailable, []string{"--url", srv.URL + "/_health"}, 1},
		{"wrong path", http.StatusOK, []string{"--url", srv.URL + "/health"}, 1},
		{"nothing listening", http.StatusOK, []string{"--url", closed.URL + "/_health"}, 1},
		{"not a URL", http.StatusOK, []string{"--url", "127.0.0.1:8000/_health"}, 1},
		{"stray argument", http.StatusOK, []string{"--url", srv.URL + "/_health", "extra"}, 2},
	} {
		status = tc.status
		var stderr bytes.Buffer
		if got := run(tc.args, &stderr); got != tc.want {
			t.Errorf("%s: exit %d, want %d (%s)", tc.name, got, tc.want, stderr.String())
		}
	}
}

// TestProbeShowsTheClientCertificate: against a server that requires a
// client certificate, as a member with --tls-* does, the probe passes
// with one (from flags or the environment) and fails without.
func TestProbeShowsTheClientCertificate(t *testing.T) {
	dir := t.TempDir()
	hoplite := filepath.Join(dir, "hoplite")
	build := exec.Command("go", "build", "-o", hoplite, "./cmd/hoplite")
	build.Dir = filepath.Join("..", "..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if out, err := exec.Command(hoplite, "certs", "--dir", dir, "--hosts", "127.0.0.1").CombinedOutput(); err != nil {
		t.Fatalf("hoplite certs: %v\n%s", err, out)
	}
	ca, cert, key := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "member.pem"), filepath.Join(dir, "member-key.pem")
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	url := srv.URL + "/_health"

	var stderr bytes.Buffer
	if got := run([]string{"--url", url, "--cert", cert, "--key", key, "--ca", ca}, &stderr); got != 0 {
		t.Errorf("with the certificate: exit %d: %s", got, stderr.String())
	}
	if got := run([]string{"--url", url, "--ca", ca}, &stderr); got != 1 {
		t.Errorf("without a certificate: exit %d, want 1", got)
	}
	if got := run([]string{"--url", url, "--cert", cert, "--key", key}, &stderr); got != 1 {
		t.Errorf("without the CA (the system's roots do not know it): exit %d, want 1", got)
	}
	for k, v := range map[string]string{"HOPLITE_PROBE_URL": url, "HOPLITE_PROBE_CERT": cert, "HOPLITE_PROBE_KEY": key, "HOPLITE_PROBE_CA": ca} {
		t.Setenv(k, v)
	}
	stderr.Reset()
	if got := run(nil, &stderr); got != 0 {
		t.Errorf("from the environment: exit %d: %s", got, stderr.String())
	}
}

// TestDefaultURLIsTheImageCommand: the image's HEALTHCHECK runs the probe
// without settings, so its default must be the manage port of the
// image's command.
func TestDefaultURLIsTheImageCommand(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CMD (\[.*\])$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("the Dockerfile has no CMD in the exec form")
	}
	var argv []string
	if err := json.Unmarshal(m[1], &argv); err != nil {
		t.Fatal(err)
	}
	flags := map[string]string{}
	for i := 0; i+1 < len(argv); i++ {
		if strings.HasPrefix(argv[i], "--") {
			flags[argv[i]] = argv[i+1]
		}
	}
	host, _, err := net.SplitHostPort(flags["--bind"])
	if err != nil {
		t.Fatalf("CMD %q: --bind: %v", argv, err)
	}
	if want := "http://" + net.JoinHostPort(host, flags["--manage-port"]) + "/_health"; defaultURL != want {
		t.Errorf("default URL %s, want %s (the image's command)", defaultURL, want)
	}
}
