package actors

import (
	"crypto/tls"

	"github.com/hoplite-go/hoplite/internal/transport"
)

// Transport is the data plane the store nodes of an application move
// objects' bytes on, apart from the actor messages that control it:
// within one process (NewMemoryTransport) or between processes over TCP
// (NewTCPTransport). It serves each node's Store at a data address, which
// the node publishes in its messages.NodeRef; a receiving node pulls an
// object from there as fast as it stores it.
type Transport struct {
	t     transport.Transport
	close func()
}

// NewMemoryTransport returns a Transport between store nodes of this
// process: a chunk is handed from the sender's Store to the receiver's
// without a socket. bandwidth, in bytes per second, limits each node's
// uplink and downlink apart, as a full-duplex link would; 0 is unlimited.
func NewMemoryTransport(bandwidth float64) *Transport {
	return &Transport{t: transport.NewMemory(bandwidth), close: func() {}}
}

// TCPConfig configures a TCP Transport; zero fields take defaults.
type TCPConfig struct {
	// ListenAddr is where Serve listens (default "127.0.0.1:0", a free
	// port). The bound address is the node's data address, which peers
	// dial: use a host they can reach rather than a wildcard.
	ListenAddr string
	// TLS, if set, runs the data plane over mutual TLS: served
	// connections must present a client certificate that TLS.ClientCAs
	// verifies (set ClientAuth to tls.RequireAndVerifyClientCert), and
	// dials present TLS.Certificates and verify the server against
	// TLS.RootCAs. Without it anyone who reaches a data address can read
	// any object of that node.
	TLS *tls.Config
	// Log, if set, receives dropped connections, refused ones and
	// protocol violations.
	Log func(format string, args ...any)
}

// NewTCPTransport returns a Transport between store nodes in different
// processes, on direct TCP connections; Close stops it.
func NewTCPTransport(cfg TCPConfig) *Transport {
	t := transport.NewTCP(transport.TCPConfig{ListenAddr: cfg.ListenAddr, TLS: cfg.TLS, Log: cfg.Log})
	return &Transport{t: t, close: t.Close}
}

// Serve makes store reachable for the store node named node and returns
// the data address that node publishes in its NodeRef (DataAddress).
func (t *Transport) Serve(node string, store *Store) (addr string, err error) {
	return t.t.Serve(node, store)
}

// Unserve stops serving the data address addr; streams open from it fail.
func (t *Transport) Unserve(addr string) { t.t.Unserve(addr) }

// Close stops serving every address and closes every connection: the
// transfers under way fail, and the Transport cannot be used again.
func (t *Transport) Close() { t.close() }

// data is t's transport for a store node (nil: none).
func (t *Transport) data() transport.Transport {
	if t == nil {
		return nil
	}
	return t.t
}
