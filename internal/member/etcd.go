package member

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/messages"
)

// ProviderError says that a membership provider's server (etcd) could not
// be used: which server, at which address, doing what. It matches
// messages.ErrUnavailable with errors.Is.
type ProviderError struct {
	Provider string // "etcd"
	Address  string // the server's host:port
	Op       string // what failed, in words
	Err      error  // the client library's error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s server at %s: %s: %v", e.Provider, e.Address, e.Op, e.Err)
}

// Unwrap is the client library's error (context.DeadlineExceeded when the
// server did not answer in time).
func (e *ProviderError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, messages.ErrUnavailable) true.
func (e *ProviderError) Is(target error) bool { return messages.ErrUnavailable.Is(target) }

// etcdLeaseTTL is how long a member's key outlives its last keep-alive:
// a member killed with SIGKILL leaves the topology this long after (its
// crash is usually detected sooner, on the connections to it). Shorter
// leases would drop a live member whose keep-alives a busy machine
// delays.
const etcdLeaseTTL = 5 // seconds

// EtcdLeaseTTL is how long, in seconds, a member's etcd registration
// outlives the member (its lease): the others see a member that stopped
// answering etcd leave within it.
const EtcdLeaseTTL = etcdLeaseTTL

// etcdKeepAlive is how often a member renews its lease.
const etcdKeepAlive = time.Second

// etcdRequestWait is the deadline of every request of the provider's
// loops. It is longer than the renewal interval: a server that many
// members load at once (64 forming on two cores) answered requests in
// more than a second, and a renewal cancelled at its deadline is work
// the server did for nothing. Two seconds still leaves two tries within
// the lease's TTL.
const etcdRequestWait = 2 * time.Second

// etcdGrace is how long, after an outage or once this member's own key
// is found missing, members that are known but have no key are kept:
// long enough for every live member to notice and register again.
const etcdGrace = etcdLeaseTTL*time.Second + 2*etcdKeepAlive

// etcdResync is how often the member list is read in full besides the
// watch (a watch that a restarted server silently dropped, or one that
// resumed at a revision the server no longer has, is replaced).
const etcdResync = 2 * time.Second

// etcdProvider is Hoplite's etcd membership provider: each member puts
// a key under /hoplite/<cluster>/members/ bound to a lease it keeps alive,
// and watches the prefix; the keys are the topology. It replaces
// Proto.Actor's provider, which names members differently from the member
// ids Hoplite greets (so members never saw each other), waits on
// context.TODO() (a server that never answers hangs the start for good)
// and drops its lease when the server is briefly away.
//
// While the server is unreachable the topology is frozen at its last
// state: members keep serving what they hold (failures are still
// detected on the connections between members) and the outage is logged
// once. When the server answers again the member registers again if its
// lease expired meanwhile, and for one lease TTL it keeps the members it
// knew even if their keys are not back yet (they are re-registering too):
// an etcd outage longer than the TTL does not make the cluster declare
// all its members failed.
type etcdProvider struct {
	address string
	prefix  string
	cli     *clientv3.Client
	log     *logrus.Entry
	// startCtx bounds the registration in StartMember (the join's
	// context: the join timeout, and the caller's cancellation).
	startCtx context.Context

	ctx    context.Context // the loops' lifetime
	cancel context.CancelFunc
	loops  sync.WaitGroup
	resync chan struct{} // the lease loop registered again: read the list

	list   *pcluster.MemberList
	selfID string
	key    string
	val    []byte

	// known is the member list as etcd holds it at revision rev: the last
	// full read with the watch's events since applied. Only StartMember
	// and then the follow loop use them.
	known map[string]*pcluster.Member
	rev   int64

	mu         sync.Mutex
	lease      clientv3.LeaseID
	down       error     // the outage being logged, or nil
	graceUntil time.Time // after an outage: keep the members known before
	published  map[string]*pcluster.Member
}

// etcdEntry is the value of a member's key.
type etcdEntry struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int32    `json:"port"`
	Kinds []string `json:"kinds,omitempty"`
}

// newEtcdProvider connects to the etcd server at cfg.ProviderAddress,
// over TLS with cfg's etcd TLS files, and checks that it is one: a Status
// request answered before ctx's deadline (at most 10 s). The client dials
// lazily, so an open port that is not etcd would otherwise only show up
// later as requests that never succeed.
func newEtcdProvider(ctx context.Context, cfg MemberConfig, log *logrus.Entry) (*etcdProvider, error) {
	address := cfg.ProviderAddress
	fail := func(op string, err error) (*etcdProvider, error) {
		return nil, &ProviderError{Provider: ProviderEtcd, Address: address, Op: op, Err: err}
	}
	log = log.WithFields(logrus.Fields{"provider": ProviderEtcd, "provider_address": address})
	if cfg.etcdTLS == nil && cfg.tls != nil {
		log.Warn("the connection to etcd is plaintext though the member runs TLS: whoever reaches etcd or its traffic " +
			"can list, add and remove members (set --etcd-ca, and --etcd-cert with --etcd-key if etcd requires a client certificate)")
	}
	// Said before the wait, so that a start that waits says on what.
	log.Info("checking the membership provider's server")
	// A closed port fails at once here; gRPC would retry it until the
	// deadline and then say only that the deadline passed.
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", address)
	if err != nil {
		return fail("unreachable", err)
	}
	_ = c.Close()
	var tlsCfg *tls.Config
	if cfg.etcdTLS != nil {
		// gRPC would retry a refused handshake until the deadline and
		// then say only that the deadline passed.
		tlsCfg = certs.ForAddr(cfg.etcdTLS, address)
		if err := etcdHandshake(ctx, address, tlsCfg); err != nil {
			return fail("TLS handshake (--etcd-cert, --etcd-key, --etcd-ca)", err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{address},
		TLS:         tlsCfg,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(), // our own log says what matters
		// A server that vanished without closing the connection (a host
		// that died, a network cut) is noticed and redialled within
		// seconds, not when the kernel gives up on the connection.
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		// gRPC's reconnect backoff grows to two minutes: after a long
		// outage a member would reconnect that long after the server is
		// back, past the others' grace period (they would declare it
		// failed). Every member retries at least every 2 s instead.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
	})
	if err != nil {
		return fail("connect", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := cli.Status(cctx, address)
	if err != nil {
		_ = cli.Close()
		err = statusErr(cctx, err)
		if tlsCfg == nil && !errors.Is(ctx.Err(), context.Canceled) && speaksTLS(address) {
			err = fmt.Errorf("the server requires TLS: set --etcd-ca (etcd's CA), and --etcd-cert with --etcd-key if it requires a client certificate: %w", err)
		}
		return fail("status request", err)
	}
	if st.Header == nil || st.Header.ClusterId == 0 {
		_ = cli.Close()
		return fail("status request", errors.New("the answer names no etcd cluster"))
	}
	pctx, pcancel := context.WithCancel(context.Background())
	return &etcdProvider{address: address, prefix: "/hoplite/" + cfg.ClusterName + "/members/", cli: cli,
		log:      log,
		startCtx: ctx, ctx: pctx, cancel: pcancel, resync: make(chan struct{}, 1),
		published: map[string]*pcluster.Member{}}, nil
}

// etcdHandshake makes one TLS connection to the etcd server at address
// and reads its first bytes, so that a refused handshake is an error that
// says why. With TLS 1.3 the server judges the client's certificate after
// the client's side of the handshake is done: its refusal is an alert on
// that first read. A server that sends nothing within the read's deadline
// is left to the Status request.
func etcdHandshake(ctx context.Context, address string, cfg *tls.Config) error {
	cfg = cfg.Clone()
	// As gRPC asks: an HTTP/2 server speaks first (its settings), so the
	// read below returns at once; over HTTP/1.1 it would wait for a
	// request until the read's deadline.
	cfg.NextProtos = []string{"h2"}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 2 * time.Second}, Config: cfg}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := d.DialContext(hctx, "tcp", address)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
	return nil
}

// statusErr classifies a failed Status request by its context, not by
// what the client returned: gRPC's own timer for the deadline can fire
// before ctx's, and the client then returns a bare gRPC status that says
// DeadlineExceeded without wrapping context.DeadlineExceeded (seen on a
// busy machine). A caller must be able to tell "no answer in time" from
// "cancelled" from "refused" with errors.Is.
func statusErr(ctx context.Context, err error) error {
	timedOut := errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		timedOut = true
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled) || (status.Code(err) == codes.Canceled && ctx.Err() != nil):
		if !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: %w", context.Canceled, err)
		}
	case timedOut:
		if !errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
		}
		err = fmt.Errorf("no answer in time (is it an etcd server?): %w", err)
	}
	return err
}

func (p *etcdProvider) err(op string, err error) error {
	return &ProviderError{Provider: ProviderEtcd, Address: p.address, Op: op, Err: err}
}

// StartMember registers the member and starts following the topology.
// It returns once the member's key is written and the first member list
// was published, or with a *ProviderError when the join's deadline
// passes first.
func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("etcd provider: %w", err)
	}
	id := c.ActorSystem.ID
	p.list, p.selfID = c.MemberList, id
	p.key = p.prefix + id
	p.val, _ = json.Marshal(etcdEntry{ID: id, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()})
	if err := p.register(p.startCtx); err != nil {
		return err
	}
	rev, err := p.refresh(p.startCtx)
	if err != nil {
		return err
	}
	p.loops.Add(2)
	go p.keepAlive()
	go p.follow(rev)
	return nil
}

// StartClient is not supported: Hoplite's clients are members.
func (p *etcdProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("etcd provider: clients are not supported")
}

// Shutdown stops the loops; graceful revokes the lease, so the others see
// the member go at once rather than after the lease TTL.
func (p *etcdProvider) Shutdown(graceful bool) error {
	p.cancel()
	p.loops.Wait()
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	if graceful && lease != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, _ = p.cli.Revoke(ctx, lease)
		cancel()
	}
	return p.cli.Close()
}

// register grants a lease and writes the member's key under it.
func (p *etcdProvider) register(ctx context.Context) error {
	lease, err := p.cli.Grant(ctx, etcdLeaseTTL)
	if err != nil {
		return p.err("grant a lease", err)
	}
	if _, err := p.cli.Put(ctx, p.key, string(p.val), clientv3.WithLease(lease.ID)); err != nil {
		return p.err("register the member", err)
	}
	p.mu.Lock()
	p.lease = lease.ID
	p.mu.Unlock()
	return nil
}

// refresh reads the member list in full and publishes it; it returns
// the revision it read at.
func (p *etcdProvider) refresh(ctx context.Context) (int64, error) {
	resp, err := p.cli.Get(ctx, p.prefix, clientv3.WithPrefix())
	if err != nil {
		return 0, p.err("read the members", err)
	}
	// First the end of an outage (it starts the grace period), then
	// what was read.
	p.reachable()
	now := map[string]*pcluster.Member{}
	for _, kv := range resp.Kvs {
		if m := etcdMember(p.prefix, kv); m != nil {
			now[m.Id] = m
		}
	}
	p.known, p.rev = now, resp.Header.GetRevision()
	p.observe()
	return p.rev, nil
}

// apply brings the member list up to date with a watch's events and
// publishes it. Only what changed crosses the network: re-reading the
// whole list on every event made a forming cluster of N members read
// N·N entries per join from the one server all of them renew their
// leases with.
func (p *etcdProvider) apply(events []*clientv3.Event) {
	p.rev = applyEtcdEvents(p.known, p.rev, p.prefix, events)
	p.observe()
}

// applyEtcdEvents applies a watch's events to known, the member list at
// revision rev, and returns the revision it is at after them. Events at
// or below rev are in known already (a full read overtook the watch).
func applyEtcdEvents(known map[string]*pcluster.Member, rev int64, prefix string, events []*clientv3.Event) int64 {
	for _, ev := range events {
		if ev.Kv == nil || ev.Kv.ModRevision <= rev {
			continue
		}
		delete(known, strings.TrimPrefix(string(ev.Kv.Key), prefix))
		if ev.Type == clientv3.EventTypePut {
			if m := etcdMember(prefix, ev.Kv); m != nil {
				known[m.Id] = m
			}
		}
		rev = ev.Kv.ModRevision
	}
	return rev
}

// etcdMember is the member a key under prefix names, or nil when the key
// is not a member's (ignored).
func etcdMember(prefix string, kv *mvccpb.KeyValue) *pcluster.Member {
	var e etcdEntry
	if json.Unmarshal(kv.Value, &e) != nil || e.ID == "" || e.ID != strings.TrimPrefix(string(kv.Key), prefix) {
		return nil
	}
	return &pcluster.Member{Id: e.ID, Host: e.Host, Port: e.Port, Kinds: e.Kinds}
}

// observe publishes the member list as known.
func (p *etcdProvider) observe() {
	if _, ok := p.known[p.selfID]; !ok {
		// Our own key is gone while we run: the server lost its state
		// (restarted empty) or our lease expired, maybe without an
		// outage this member noticed. The others' keys are likely gone
		// for the same reason: give them a lease TTL to register again
		// (the keep-alive registers us again) before taking their
		// absence for a departure.
		p.mu.Lock()
		start := !time.Now().Before(p.graceUntil)
		if start {
			p.graceUntil = time.Now().Add(etcdGrace)
		}
		p.mu.Unlock()
		if start {
			p.log.Warn("this member's key is missing from the membership provider: keeping the members known for a lease TTL while they register again")
		}
	}
	p.publish(maps.Clone(p.known))
}

// publish hands the member list to Proto.Actor's member list (which
// posts the ClusterTopology the members actor follows). Within the grace
// period after an outage, members known before it stay in.
func (p *etcdProvider) publish(now map[string]*pcluster.Member) {
	p.mu.Lock()
	if time.Now().Before(p.graceUntil) {
		for id, m := range p.published {
			if _, ok := now[id]; !ok {
				now[id] = m
			}
		}
	}
	p.published = now
	members := make([]*pcluster.Member, 0, len(now))
	for _, m := range now {
		members = append(members, &pcluster.Member{Id: m.Id, Host: m.Host, Port: m.Port, Kinds: slices.Clone(m.Kinds)})
	}
	p.mu.Unlock()
	slices.SortFunc(members, func(a, b *pcluster.Member) int { return strings.Compare(a.Id, b.Id) })
	p.list.UpdateClusterTopology(members)
}

// unreachable records a failed request of the loops; the first of an
// outage is logged.
func (p *etcdProvider) unreachable(err error) {
	if p.ctx.Err() != nil {
		return
	}
	p.mu.Lock()
	first := p.down == nil
	p.down = err
	n := len(p.published)
	p.mu.Unlock()
	if first {
		p.log.WithError(err).WithField("members", n).Warn(
			"membership provider unreachable: the membership is frozen at its last view; this member keeps serving what it holds")
	}
}

// reachable records a successful request; the end of an outage is logged
// and starts the grace period.
func (p *etcdProvider) reachable() {
	p.mu.Lock()
	was := p.down
	p.down = nil
	if was != nil {
		p.graceUntil = time.Now().Add(etcdGrace)
	}
	p.mu.Unlock()
	if was != nil {
		p.log.Info("membership provider reachable again: membership resumed")
		select {
		case p.resync <- struct{}{}:
		default:
		}
	}
}

// keepAlive renews the lease every etcdKeepAlive; a lease that expired
// while the server was away is replaced by a new registration.
func (p *etcdProvider) keepAlive() {
	defer p.loops.Done()
	t := time.NewTicker(etcdKeepAlive)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(p.ctx, etcdRequestWait)
		p.mu.Lock()
		lease := p.lease
		p.mu.Unlock()
		_, err := p.cli.KeepAliveOnce(ctx, lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			p.log.Warn("membership lease expired (the provider was unreachable for longer than its TTL): registering again")
			err = p.register(ctx)
		}
		cancel()
		if err != nil {
			p.unreachable(err)
			continue
		}
		p.reachable()
	}
}

// follow publishes the member list on every change: a watch from the
// revision last read, a full read every etcdResync and after an outage.
func (p *etcdProvider) follow(rev int64) {
	defer p.loops.Done()
	resync := time.NewTicker(etcdResync)
	defer resync.Stop()
	for p.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(p.ctx))
		events := p.cli.Watch(wctx, p.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		rev = p.watch(events, resync.C)
		cancel()
	}
}

// watch follows one watch until it ends or a full read is due; it
// returns the revision to watch from next.
func (p *etcdProvider) watch(events clientv3.WatchChan, resync <-chan time.Time) int64 {
	read := func() (int64, bool) {
		ctx, cancel := context.WithTimeout(p.ctx, etcdRequestWait)
		defer cancel()
		rev, err := p.refresh(ctx)
		if err != nil {
			p.unreachable(err)
			return 0, false
		}
		return rev, true
	}
	for {
		select {
		case <-p.ctx.Done():
			return 0
		case resp, ok := <-events:
			if !ok || resp.Canceled || resp.Err() != nil {
				// Ended (compacted, no leader, server gone): read again
				// once it answers, then watch from there.
				for {
					if rev, ok := read(); ok {
						return rev
					}
					select {
					case <-p.ctx.Done():
						return 0
					case <-time.After(etcdKeepAlive):
					}
				}
			}
			if len(resp.Events) > 0 {
				p.apply(resp.Events)
			}
		case <-resync:
			// A full read as a safety net; the watch goes on.
			read()
		case <-p.resync:
			if rev, ok := read(); ok {
				return rev
			}
		}
	}
}
