package member

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// TLSConfig loads a member's (or a client's) mutual TLS configuration:
// its certificate and key, and the cluster's CA, which verifies both the
// servers it dials and the clients that dial it (RequireAndVerifyClientCert).
// Pass it to RemoteConfig for a client actor system that talks to a
// cluster started with --tls-cert, --tls-key and --tls-ca.
func TLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	c, err := certs.Config(certFile, keyFile, caFile)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%v", err)
	}
	return c, nil
}

// GenerateCerts writes a test cluster's CA (ca.pem, ca-key.pem) and a
// member certificate (member.pem, member-key.pem) for hosts into dir:
// what `hoplite certs` does. It returns the paths of the CA, the member
// certificate and its key.
func GenerateCerts(dir string, hosts []string) (ca, cert, key string, err error) {
	f, err := certs.Generate(dir, hosts)
	return f.CA, f.Cert, f.Key, err
}

// IssueCert signs another member certificate (name.pem, name-key.pem,
// for hosts) with the CA GenerateCerts wrote into dir (its ca.pem and
// ca-key.pem): what `hoplite certs --name` does. Members with certificates
// of their own are told apart by the limits that count connections per
// source and certificate. It returns the certificate's and the key's
// paths.
func IssueCert(dir, name string, hosts []string) (cert, key string, err error) {
	return certs.Issue(dir, name, hosts)
}

// remoteWindow is the flow-control window of Proto.Actor remote's gRPC
// connections and of their stream, both ways. A window set, rather than
// gRPC's dynamic one, turns its bandwidth-delay estimator off, which
// otherwise pings the sender back after the data it receives: a ping and
// its ack, each a write and a wake-up of the other process, beside most
// small control messages (TestRemoteRequestWrites). 16 MiB is the most
// the dynamic window grows to; nothing is allocated for it, it bounds
// what a peer sends ahead of the reader, which hands every message on
// as it arrives (WithMaxQueuedFromRemote bounds what waits beyond).
const remoteWindow = 16 << 20

// RemoteConfig is the Proto.Actor remote configuration of an actor system
// that talks to a cluster's members: theirs, and a client's (a tool, a
// barrier client, a bench driver). With tlsCfg (TLSConfig) remote runs
// over mutual TLS: the server requires a client certificate the CA signed
// and logs every refused handshake at warn on log (nil: discarded); dials
// present this side's certificate. tlsCfg nil is plaintext.
func RemoteConfig(host string, port int, tlsCfg *tls.Config, log logrus.FieldLogger) *remote.Config {
	creds := insecure.NewCredentials()
	server := []grpc.ServerOption{grpc.MaxRecvMsgSize(maxRemoteMessage), grpc.MaxSendMsgSize(maxRemoteMessage),
		// A client that connects and says nothing is dropped after this
		// (gRPC's default is 120 s).
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.InitialWindowSize(remoteWindow), grpc.InitialConnWindowSize(remoteWindow)}
	if tlsCfg != nil {
		if log == nil {
			l := logrus.New()
			l.SetOutput(io.Discard)
			log = l
		}
		creds = credentials.NewTLS(tlsCfg)
		server = append(server, grpc.Creds(&refusingCreds{TransportCredentials: credentials.NewTLS(tlsCfg),
			log: log, port: net.JoinHostPort(host, fmt.Sprint(port))}))
	}
	rc := remote.Configure(host, port,
		// The writer's queue to each peer grows as needed; Proto.Actor's
		// default preallocates a million slots (16 MiB per peer: 240 MiB
		// per member of a 16-member cluster, before any message).
		remote.WithEndpointWriterQueueSize(1024),
		// Hoplite's actors are stopped by their own process only; a peer
		// (any host that reaches the port, or any certificate holder)
		// must not stop a store node or a shard.
		remote.WithRefuseRemoteStop(),
		// A message past gRPC's limit is answered INVALID_ARGUMENT at the
		// sender instead of breaking the connection (the margin is the
		// batch's type and PID tables).
		remote.WithMaxMessageSize(maxRemoteMessage-64<<10),
		// A peer that sends faster than an actor handles its messages
		// is answered RESOURCE_EXHAUSTED past this many queued, instead of
		// growing the actor's mailbox without bound.
		remote.WithMaxQueuedFromRemote(maxQueuedFromRemote),
		// And a peer that stops reading holds at most this many of this
		// system's messages in its endpoint writer.
		remote.WithMaxQueuedToRemote(maxQueuedFromRemote),
		remote.WithServerOptions(server...),
		// Idle connections probed rarely (transport.KeepAlive): a member
		// holds one to every member its actors wrote to.
		remote.WithListenKeepAlive(transport.KeepAlive),
		remote.WithDialOptions(grpc.WithTransportCredentials(creds),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				d := net.Dialer{KeepAliveConfig: transport.KeepAlive}
				return d.DialContext(ctx, "tcp", addr)
			}),
			grpc.WithInitialWindowSize(remoteWindow), grpc.WithInitialConnWindowSize(remoteWindow),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRemoteMessage), grpc.MaxCallSendMsgSize(maxRemoteMessage))))
	// One connection attempt: a member that cannot be reached is failed
	// (it would be retried for 10s otherwise while messages wait).
	rc.MaxRetryCount = 1
	return rc
}

// refusingCreds are the remote server's TLS credentials, which log the
// handshakes they refuse: gRPC only logs them through its global logger,
// which Proto.Actor silences, and a refused peer must be visible.
type refusingCreds struct {
	credentials.TransportCredentials
	log  logrus.FieldLogger
	port string
}

// ServerHandshake implements credentials.TransportCredentials.
func (c *refusingCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	peer := conn.RemoteAddr().String()
	nc, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		logRefused(c.log.WithFields(logrus.Fields{"peer": peer, "port": "remote " + c.port}), err)
	}
	return nc, info, err
}

// Clone implements credentials.TransportCredentials.
func (c *refusingCreds) Clone() credentials.TransportCredentials {
	return &refusingCreds{TransportCredentials: c.TransportCredentials.Clone(), log: c.log, port: c.port}
}

// tlsManageListener serves the manage port over mutual TLS. The handshake
// runs on the connection's first read, in the HTTP server's goroutine for
// the connection (not in Accept, which one silent client would block),
// bounded by handshakeTimeout; a refused handshake is logged with the peer
// and the reason (net/http would say nothing of a plaintext request).
type tlsManageListener struct {
	net.Listener
	cfg  *tls.Config
	log  *logrus.Entry
	port int
}

const handshakeTimeout = 10 * time.Second

func (l *tlsManageListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &handshakeConn{Conn: tls.Server(nc, l.cfg), l: l}, nil
}

type handshakeConn struct {
	*tls.Conn
	l    *tlsManageListener
	once sync.Once
	err  error
}

func (c *handshakeConn) handshake() error {
	c.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		defer cancel()
		if c.err = c.Conn.HandshakeContext(ctx); c.err != nil {
			logRefused(c.l.log.WithFields(logrus.Fields{"peer": c.RemoteAddr().String(), "port": fmt.Sprintf("manage %d", c.l.port)}), c.err)
		}
	})
	return c.err
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}

// checkSeeds asks every other seed's manage port for /_health once before
// joining, the way the provider will, so that a member whose certificate
// the cluster refuses (or that has none, or has one and the cluster runs
// plaintext) fails Join with a clear error instead of forming a cluster of
// its own: the provider would only count those seeds as absent. Seeds that
// do not answer at all (not started yet, or listening but not serving yet:
// members started together) are not an error. The seeds are asked in
// parallel, each for at most SeedCheckTimeout, so a join waits for that
// at most once.
func (m *Member) checkSeeds(ctx context.Context, self string) error {
	cfg := m.cfg
	tr := &http.Transport{TLSClientConfig: cfg.tls, DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: SeedCheckTimeout}).DialContext, TLSHandshakeTimeout: SeedCheckTimeout}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: SeedCheckTimeout}
	scheme := "http"
	if cfg.tls != nil {
		scheme = "https"
	}
	errs := make([]error, len(cfg.Seeds))
	var wg sync.WaitGroup
	for i, seed := range cfg.Seeds {
		if seed == self {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = checkSeed(ctx, client, scheme, seed, cfg.tls != nil)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("join: checking the seeds: %w", ctx.Err())
	}
	for _, err := range errs {
		if err != nil {
			return err // typed (*messages.Error); one seed's reason is enough
		}
	}
	return nil
}

// SeedCheckTimeout bounds checkSeeds' request to each seed.
const SeedCheckTimeout = 2 * time.Second

func checkSeed(ctx context.Context, client *http.Client, scheme, seed string, withTLS bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+seed+"/_health", nil)
	if err != nil {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "seed %s: %v", seed, err)
	}
	resp, err := client.Do(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		err = fmt.Errorf("HTTP status %d", resp.StatusCode)
	}
	if ctx.Err() != nil || absent(err) {
		return nil
	}
	// Only a TLS mismatch fails the join: anything else (a seed that is
	// stopping resets the connection) is for the provider to judge.
	var why string
	msg := err.Error()
	switch {
	case !withTLS:
		if !speaksTLS(seed) {
			return nil
		}
		why = "it requires mutual TLS: start this member with --tls-cert, --tls-key and --tls-ca (a certificate signed by the cluster's CA)"
	case strings.Contains(msg, "HTTP response to HTTPS client"):
		why = "it speaks plaintext HTTP but this member runs TLS (--tls-cert): the cluster runs without TLS"
	case strings.Contains(msg, "tls:") || strings.Contains(msg, "x509:") || strings.Contains(msg, "certificate"):
		why = "the TLS handshake failed: this member's certificate is not signed by the cluster's CA, or the seed's is not signed by this member's (--tls-ca)"
	default:
		return nil
	}
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "join: seed %s refused this member on its manage port: %s: %v", seed, why, err)
}

// absent: nothing answers at addr (not started yet, or gone).
func absent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &ne) && ne.Timeout()
}

// speaksTLS reports whether addr answers a TLS handshake (without a client
// certificate, not verified: only to tell a plaintext member why it was
// refused).
func speaksTLS(addr string) bool {
	d := &net.Dialer{Timeout: SeedCheckTimeout}
	c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // probe only
	if err != nil {
		// A server requiring a client certificate may abort the handshake
		// with an alert: that is TLS too.
		return strings.Contains(err.Error(), "remote error: tls")
	}
	c.Close()
	return true
}

// logRefused logs a refused TLS handshake: at warn when the peer spoke
// and was refused (no certificate, another CA, plaintext), at debug when
// it closed the connection before saying anything. Members do that to
// each other all the time: a liveness probe only opens a connection, and
// the automanaged provider's HTTP client drops idle ones.
func logRefused(log logrus.FieldLogger, err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
		log.WithError(err).Debug("a connection closed before its TLS handshake (a probe, or an idle client going away)")
		return
	}
	log.WithError(err).Warn("refused a connection: TLS handshake failed (no client certificate, or not signed by the cluster's CA)")
}
