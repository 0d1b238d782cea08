// Command hoplite-probe checks a hoplite member's manage port for the
// container's health check and Kubernetes' exec probes: it GETs a URL
// (by default the member's /_health) and exits 0 on 200, 1 otherwise.
//
// Kubernetes' httpGet probes and Docker's images without a shell cannot
// show a client certificate, and a member with --tls-* requires one on
// every port; this program shows the member's own. Its settings come
// from flags or, since exec probes expand no variables, from the
// environment:
//
//	HOPLITE_PROBE_URL   default http://127.0.0.1:8000/_health
//	HOPLITE_PROBE_CERT  client certificate (PEM), with HOPLITE_PROBE_KEY
//	HOPLITE_PROBE_KEY   its key (PEM)
//	HOPLITE_PROBE_CA    the CA that signed the member's certificate (PEM)
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"
)

// defaultURL is the manage port of `hoplite node --bind 127.0.0.1:7000
// --manage-port 8000`, the image's default command.
const defaultURL = "http://127.0.0.1:8000/_health"

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

func run(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("hoplite-probe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("url", env("HOPLITE_PROBE_URL", defaultURL), "URL to GET (env HOPLITE_PROBE_URL)")
	cert := fs.String("cert", os.Getenv("HOPLITE_PROBE_CERT"), "client certificate, PEM (env HOPLITE_PROBE_CERT)")
	key := fs.String("key", os.Getenv("HOPLITE_PROBE_KEY"), "key of -cert, PEM (env HOPLITE_PROBE_KEY)")
	ca := fs.String("ca", os.Getenv("HOPLITE_PROBE_CA"), "CA that signed the member's certificate, PEM (env HOPLITE_PROBE_CA)")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hoplite-probe: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := probe(ctx, *target, *cert, *key, *ca); err != nil {
		fmt.Fprintf(stderr, "hoplite-probe: %v\n", err)
		return 1
	}
	return 0
}

// probe GETs target and returns nil if it answered 200 before ctx ended.
func probe(ctx context.Context, target, cert, key, ca string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("url %q: want http:// or https://HOST:PORT/PATH", target)
	}
	tr := &http.Transport{DisableKeepAlives: true}
	if u.Scheme == "https" {
		cfg, err := clientTLS(cert, key, ca)
		if err != nil {
			return err
		}
		tr.TLSClientConfig = cfg
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	// Drain a little so that the member does not log a reset; health
	// bodies are a few hundred bytes.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", target, resp.Status)
	}
	return nil
}

// clientTLS is the TLS configuration that shows cert and verifies the
// member against ca (the system's roots without it).
func clientTLS(cert, key, ca string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if (cert == "") != (key == "") {
		return nil, errors.New("a client certificate needs both -cert and -key")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s holds no PEM certificate", ca)
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
