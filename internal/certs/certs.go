// Package certs makes and loads the certificates of a cluster's mutual TLS:
// one CA, and member certificates it signs that serve and dial alike (a
// member is a server to some peers and a client to others on every port).
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity of the certificates Generate makes: a test cluster's.
const Validity = 365 * 24 * time.Hour

// Files are the paths Generate wrote.
type Files struct {
	CA, Cert, Key string // ca.pem, member.pem, member-key.pem
}

// Generate writes a new CA (ca.pem, ca-key.pem) and a member certificate
// it signs (member.pem, member-key.pem) into dir: ECDSA P-256, valid for
// Validity, with SANs for hosts (IPs become IP SANs, names DNS SANs). One
// member certificate serves every member of a test cluster on those hosts.
func Generate(dir string, hosts []string) (Files, error) {
	if len(hosts) == 0 {
		return Files{}, errors.New("certs: no hosts for the certificate's SANs")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Files{}, fmt.Errorf("certs: %w", err)
	}
	caKey, caDER, err := newCA("hoplite test CA")
	if err != nil {
		return Files{}, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Files{}, fmt.Errorf("certs: %w", err)
	}
	key, der, err := newLeaf(caCert, caKey, hosts)
	if err != nil {
		return Files{}, err
	}
	f := Files{CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "member.pem"), Key: filepath.Join(dir, "member-key.pem")}
	if err := writePEM(f.CA, "CERTIFICATE", caDER, 0o644); err != nil {
		return Files{}, err
	}
	if err := writeKey(filepath.Join(dir, "ca-key.pem"), caKey); err != nil {
		return Files{}, err
	}
	if err := writePEM(f.Cert, "CERTIFICATE", der, 0o644); err != nil {
		return Files{}, err
	}
	if err := writeKey(f.Key, key); err != nil {
		return Files{}, err
	}
	return f, nil
}

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: serial: %w", err)
	}
	return n, nil
}

func newCA(name string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: name, Organization: []string{"hoplite"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		IsCA: true, BasicConstraintsValid: true, MaxPathLenZero: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA: %w", err)
	}
	return key, der, nil
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string) (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: sn, Subject: pkix.Name{CommonName: "hoplite member", Organization: []string{"hoplite"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		KeyUsage: x509.KeyUsageDigitalSignature,
		// Both: a member accepts connections and dials them on every port.
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: member certificate: %w", err)
	}
	return key, der, nil
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

// Config is the mutual TLS configuration of a member or a client: its
// certificate, and the cluster's CA for both directions: it verifies the
// servers it dials (RootCAs) and requires and verifies the certificates
// of the clients that dial it (ClientCAs). The same *tls.Config serves as
// a server's and a dialer's; dialers set ServerName per address (ForAddr).
func Config(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s / key %s: %w", certFile, keyFile, err)
	}
	pemCA, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// ForAddr is cfg for dialing addr (host:port): ServerName is its host, so
// the server's certificate is verified against it (an IP SAN for an IP).
func ForAddr(cfg *tls.Config, addr string) *tls.Config {
	c := cfg.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	return c
}

// ClientConfig is the TLS configuration of a client of a server outside
// the cluster (etcd): caFile verifies the server (empty: the system's
// roots), and certFile with keyFile, both or neither, is the certificate
// the client presents to a server that requires one.
func ClientConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("a client certificate needs its key: got certificate %q, key %q", certFile, keyFile)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate %s / key %s: %w", certFile, keyFile, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if caFile != "" {
		pemCA, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCA) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// Issue signs another member certificate with the CA that Generate wrote
// into dir (ca.pem, ca-key.pem): name.pem and name-key.pem, for hosts. A
// cluster whose members must be told apart (the manage port and the data
// plane bound connections per source and certificate) gives each its
// own.
func Issue(dir, name string, hosts []string) (cert, key string, err error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	if err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return "", "", errors.New("certs: ca.pem or ca-key.pem holds no PEM block")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	caKey, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return "", "", fmt.Errorf("certs: %w", err)
	}
	k, der, err := newLeaf(ca, caKey, hosts)
	if err != nil {
		return "", "", err
	}
	cert, key = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(cert, "CERTIFICATE", der, 0o644); err != nil {
		return "", "", err
	}
	if err := writeKey(key, k); err != nil {
		return "", "", err
	}
	return cert, key, nil
}
