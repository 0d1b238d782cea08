// Package etcdtest runs a real etcd server inside a test process: etcd's
// own embeddable server (go.etcd.io/etcd/server/v3/embed, the version of
// the client Hoplite uses), on 127.0.0.1, with its data in a temporary
// directory, in plaintext or (StartTLS) over TLS with client certificate
// auth. Tests of the etcd membership provider start one, stop it and
// start it again on the same address and data, as an operator restarts
// etcd.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/testutil"
)

// Server is one single-member etcd cluster.
type Server struct {
	t         testing.TB
	dir       string
	client    string // host:port
	clientURL url.URL
	peerURL   url.URL
	tls       *certs.Files // StartTLS's
	etcd      *embed.Etcd
}

// Start starts an etcd server and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil)
}

// StartTLS starts an etcd server whose client port speaks only TLS and
// requires a client certificate its CA signed (etcd's --client-cert-auth),
// and stops it when the test ends. Its CA, made for it, is no one else's;
// TLS names the CA and the certificate a client presents.
func StartTLS(t testing.TB) *Server {
	t.Helper()
	f, err := certs.Generate(filepath.Join(t.TempDir(), "etcd-tls"), []string{"127.0.0.1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	return start(t, &f)
}

func start(t testing.TB, tls *certs.Files) *Server {
	t.Helper()
	ports := freePorts(t, 2)
	scheme := "http"
	if tls != nil {
		scheme = "https"
	}
	s := &Server{t: t, dir: t.TempDir(), tls: tls,
		client:    net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		clientURL: url.URL{Scheme: scheme, Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))},
		peerURL:   url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))},
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Endpoint is the client address, host:port.
func (s *Server) Endpoint() string { return s.client }

// TLS is a StartTLS server's CA and a client certificate it accepts (the
// server presents one made the same way); the zero Files for Start's.
func (s *Server) TLS() certs.Files {
	if s.tls == nil {
		return certs.Files{}
	}
	return *s.tls
}

func (s *Server) start() error {
	cfg := embed.NewConfig()
	cfg.Name = "hoplite-test"
	cfg.Dir = s.dir
	cfg.LogLevel = "error"
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.Name + "=" + s.peerURL.String()
	if s.tls != nil {
		cfg.ClientTLSInfo.CertFile = s.tls.Cert
		cfg.ClientTLSInfo.KeyFile = s.tls.Key
		cfg.ClientTLSInfo.TrustedCAFile = s.tls.CA
		cfg.ClientTLSInfo.ClientCertAuth = true
	}
	// No metrics or gRPC gateway listeners beyond the client URL.
	cfg.Metrics = "basic"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd on %s: %w", s.client, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd on %s: %w", s.client, err)
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("etcd on %s was not ready within 30s", s.client)
	}
	s.etcd = e
	return nil
}

// Stop stops the server (its data stays for Restart). Stopping a stopped
// server does nothing.
func (s *Server) Stop() {
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}

// Restart starts the stopped server again, on the same address and data.
// The address may have been taken meanwhile: it retries for a few seconds.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatal(err)
}

// RestartEmpty starts the stopped server again on the same address with
// no data: an etcd that lost its state (every lease and key is gone).
func (s *Server) RestartEmpty() {
	s.t.Helper()
	s.Stop()
	s.dir = s.t.TempDir()
	s.Restart()
}

func freePorts(t testing.TB, n int) []int { return testutil.FreePorts(t, n) }

// NotEtcd is an open TCP port that is not an etcd server: it accepts
// connections and answers every read with an HTTP error, as a web server
// on the wrong port would.
func NotEtcd(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil {
						return
					}
					_, _ = conn.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
				}
			}()
		}
	}()
	return ln.Addr().String()
}
