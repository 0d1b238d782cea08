package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/logbridge"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/memberview"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// ShardOwners is the placement every member computes from the same live
// member list: the owner of each of shards directory shards (rendezvous
// hashing). Tools use it to find an object's shard.
func ShardOwners(live []string, shards int) []string { return memberview.ShardOwners(live, shards) }

// Client is a client of a running cluster that is not a member of it: a
// small Proto.Actor actor system of its own that sends the application
// messages to one member's store node (Put, Get, Delete, Reduce, Info,
// Wait and the typed helpers of storenode.Client, promoted) and asks the
// members and directory shards what an operator wants to see (Members,
// List, Status). It holds no objects and no shards; the member it talks
// to is the creator of what it Puts. When that member fails, the client
// moves to another live one (see Dial).
//
// Objects' bytes never ride inside its messages: they move on the
// members' data plane, as members move them between themselves. A Get
// (GetReadOnly, GetInto, GetTo, the typed Gets) has the member bring a
// copy into its store and streams it from there; a Put of 1 MiB or more
// (and every PutFrom of as much) serves the bytes on a data-plane
// endpoint of the client's own, at its address (WithBind's host), which
// the member fetches them from. So an object is capped only by the
// members' capacity, and PutFrom and GetTo stream from an io.Reader and
// into an io.Writer. The exception is a client of an embedded cluster
// (StartLocal), whose members' data plane is their process's memory,
// which no other process reaches: its bytes ride inside the requests,
// at most one remote message (256 MiB) each.
type Client struct {
	*storenode.Client
	system  *actor.ActorSystem
	remote  *remote.Remote // nil: the system is the application's (WithActorSystem)
	ep      endpoints      // the members it may talk to, and the one it does
	timeout time.Duration
	data    *transport.TCP // the client side of the data plane (see dataPath)
}

// endpoints are the member addresses a Client may talk to. inUse is the
// member the calls go to; known lists the live members as the last
// handshake reported them, given those Dial was passed (kept: a member
// that left may come back at its address).
type endpoints struct {
	mu    sync.Mutex
	inUse string
	given []string
	known []string
	// view is the live members' ids as the client last learned them:
	// the periodic refresh sends their digest and is answered without
	// the view while it holds.
	view []string
	// data are the store nodes' data addresses, by PID (PIDKey), as the
	// handshakes reported them: where a Get streams from.
	data map[string]string
	// moving serializes failovers: the calls that failed at once move
	// to one member, found once.
	moving sync.Mutex
	// stop ends the refresh loop (nil until it starts).
	stop     chan struct{}
	stopOnce sync.Once
}

// dataPath is a Dial client's storenode.DataPath: its Puts' and Gets'
// bytes go between the client and its member on the member's data plane,
// the TCP streams members fetch copies with, instead of inside remote
// messages (one gRPC message per object, encoded, copied and decoded
// whole, at most 256 MiB). A Get has the member bring a copy into its
// store (a prefetching Get, answered without the bytes) and streams it
// from there; a Put serves the object on an endpoint of the client's own
// and sends a messages.PutFrom naming it, and the member fetches it as it
// fetches from a peer, into its creator copy.
type dataPath struct {
	c   *Client
	tcp *transport.TCP
	seq atomic.Uint64 // names the endpoint of each Put
}

// DialOption configures Dial.
type DialOption func(*dialConfig)

type dialConfig struct {
	bind    string
	timeout time.Duration
	log     *logrus.Logger
	tls     *tls.Config
	system  *actor.ActorSystem
}

// WithBind sets the client's own address HOST:PORT, which the members
// connect back to with their replies (default: the local address that
// routes to the member, on a free port).
func WithBind(hostPort string) DialOption { return func(c *dialConfig) { c.bind = hostPort } }

// WithTimeout bounds calls whose context has no deadline (default 30s).
func WithTimeout(d time.Duration) DialOption { return func(c *dialConfig) { c.timeout = d } }

// WithLogger receives Proto.Actor's logs (default: discarded).
func WithLogger(l *logrus.Logger) DialOption { return func(c *dialConfig) { c.log = l } }

// WithActorSystem has the client send its messages from system, an
// actor system of the application's whose Proto.Actor remote is started
// (on Hoplite's copy of Proto.Actor, see docs/architecture.md), instead
// of an actor system of its own: its remote address is where the members
// answer, and its host is where the client serves the bytes of its Puts
// (the option replaces WithBind; the remote's TLS is the system's own,
// WithTLS still secures the data plane). Close then leaves system
// running.
//
// Why: an application actor in another process than the members, in
// its own actor system, moves an object's bytes on the data plane this
// way, as members do, instead of inside one remote message (encoded,
// copied and decoded whole, and at most 256 MiB). It calls the client
// from a goroutine of its own and sends itself the result
// (docs/architecture.md, "Where application actors live").
func WithActorSystem(system *actor.ActorSystem) DialOption {
	return func(c *dialConfig) { c.system = system }
}

// WithTLS talks to a cluster that runs mutual TLS, with a certificate
// its CA signed (see TLSConfig).
func WithTLS(cfg *tls.Config) DialOption { return func(c *dialConfig) { c.tls = cfg } }

// MemberInfo is one live member as a member reports it.
type MemberInfo struct {
	ID, Address string
}

// Dial connects to the cluster that the member at addr (its actor system
// address, HOST:PORT, as `hoplite node` prints it) belongs to, and checks
// that the member answers and speaks this protocol version. addr may
// list several members, comma-separated ("a:7000,b:7000"): Dial uses
// the first that answers.
//
// The client then fails over: when a request to its member fails
// UNAVAILABLE (the member died), it greets the live members (as a member
// last listed them, then the addresses given) and goes on with the first
// that answers, within the call's deadline. Put, PutFrom, Get, GetInto,
// GetTo, Delete, Info and Wait are sent again there (they are
// idempotent; a Get resumes at the bytes it has; a Put whose only copy
// died with the member may then fail LOST); a Reduce or
// AllReduce only if it never reached the member (its actor system
// answered that the store node is not running, or the request could not
// be sent), else it fails UNAVAILABLE (the Reduce may still run) and the
// next call goes to the new member. Members, List and Status fail over
// too. Every handshake refreshes the live members the client knows
// (Endpoints), and the client asks its member for them every few
// seconds (moving on if the member is gone), so that it knows the
// members that joined since.
//
// Errors are typed: INVALID_ARGUMENT for a bad address (a member's
// manage port too: the error names the member's address), UNAVAILABLE
// when no member answers before ctx ends (or is not a Hoplite member),
// and INVALID_ARGUMENT also for one that speaks another protocol version.
func Dial(ctx context.Context, addr string, opts ...DialOption) (*Client, error) {
	cfg := dialConfig{timeout: 30 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	addrs, err := SplitEndpoints(addr)
	if err != nil {
		return nil, err
	}
	if cfg.system != nil {
		return dialInSystem(ctx, cfg, addrs)
	}
	if cfg.bind == "" {
		cfg.bind = net.JoinHostPort(routeTo(addrs[0]), "0")
	}
	bhost, bport, err := net.SplitHostPort(cfg.bind)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "client address %q: want HOST:PORT", cfg.bind)
	}
	pn, err := net.LookupPort("tcp", bport)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "client address %q: %v", cfg.bind, err)
	}
	log := cfg.log
	if log == nil {
		log = logrus.New()
		log.SetOutput(io.Discard)
	}
	system := member.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logbridge.MemberLogger(log, "client")
	}))
	r := remote.NewRemote(system, RemoteConfig(bhost, pn, cfg.tls, log))
	if err := startRemote(r); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "client address %s: %v", cfg.bind, err)
	}
	return dialWith(ctx, &Client{system: system, remote: r, timeout: cfg.timeout}, cfg, addrs, bhost)
}

// dialInSystem is Dial from the application's actor system cfg.system.
func dialInSystem(ctx context.Context, cfg dialConfig, addrs []string) (*Client, error) {
	if cfg.bind != "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "WithBind and WithActorSystem: the client's address is its actor system's")
	}
	host, port, err := net.SplitHostPort(cfg.system.Address())
	if pn, perr := strconv.Atoi(port); err != nil || perr != nil || pn <= 0 || host == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"the actor system's address %q is no remote address: start its Proto.Actor remote before Dial", cfg.system.Address())
	}
	return dialWith(ctx, &Client{system: cfg.system, timeout: cfg.timeout}, cfg, addrs, host)
}

// dialWith greets the first member of addrs that answers from c's actor
// system and sets c up to use it, its data plane served on bhost.
func dialWith(ctx context.Context, c *Client, cfg dialConfig, addrs []string, bhost string) (*Client, error) {
	c.ep.given = addrs
	member, hello, err := c.helloFirst(ctx, addrs)
	if err != nil {
		// Not c.Close(): a connection attempt to something that is not a
		// member may hold Proto.Actor's shutdown for gRPC's connect
		// timeout; it ends by itself.
		go c.shutdown()
		return nil, dialManagePort(ctx, addrs, cfg.tls, err)
	}
	c.use(member, hello)
	c.Client = storenode.NewFailoverClient(c.system.Root, hello.GetStore().PID(), cfg.timeout, c.failover)
	if !reachableData(hello.GetStore().GetDataAddress()) {
		// The member's data plane is its process's memory (an embedded
		// cluster's, StartLocal): no other process reaches it, and the
		// bytes ride inside the requests, at most one remote message
		// each. Its members all have one, so failing over changes
		// nothing.
		c.startRefresh()
		return c, nil
	}
	// The members' data planes require mutual TLS when remote does: the
	// client's certificate serves both.
	c.data = transport.NewTCP(transport.TCPConfig{ListenAddr: net.JoinHostPort(bhost, "0"), TLS: cfg.tls})
	c.Client.SetDataPath(&dataPath{c: c, tcp: c.data})
	// A Get's new slice is faulted in as its bytes land: the kind of page
	// that costs less here is measured once per process, as a member does
	// at its warm-up, off the caller's path.
	go bufalloc.ChoosePages()
	c.startRefresh()
	return c, nil
}

// reachableData says whether addr, a member's data address, is one
// another process can connect to: a TCP data plane's "host:port#…", not
// an in-memory one's "mem://…" nor none.
func reachableData(addr string) bool {
	return addr != "" && !strings.Contains(addr, "://")
}

// manageMember is the member address that a manage port at addr names
// in its /_health answer, or "" if addr serves none within
// ctx and member.SeedCheckTimeout.
func manageMember(ctx context.Context, addr string, tlsCfg *tls.Config) string {
	if ctx.Err() != nil {
		return ""
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true,
		DialContext: (&net.Dialer{Timeout: member.SeedCheckTimeout}).DialContext, TLSHandshakeTimeout: member.SeedCheckTimeout}
	defer tr.CloseIdleConnections()
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+"/_health", nil)
	if err != nil {
		return ""
	}
	resp, err := (&http.Client{Transport: tr, Timeout: member.SeedCheckTimeout}).Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var n struct { // the fields of the member's /_health answer it reads
		Address string `json:"address"`
		Port    int    `json:"port"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&n) != nil || n.Address == "" || n.Port <= 0 {
		return ""
	}
	return net.JoinHostPort(n.Address, strconv.Itoa(n.Port))
}

// startRemote runs Proto.Actor's Remote.Start, which panics on a port in
// use.
func startRemote(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if e, ok := p.(error); ok {
				err = e
				return
			}
			err = fmt.Errorf("%v", p)
		}
	}()
	r.Start()
	return nil
}

// routeTo is the local address the system would use to reach addr (a UDP
// "connection" sends nothing); loopback if it cannot tell.
func routeTo(addr string) string {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "127.0.0.1"
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String()
}

// request asks pid and waits for the answer, within ctx or the client's
// default timeout.
func (c *Client) request(ctx context.Context, pid *actor.PID, msg any) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	return actorutil.Request(ctx, c.system.Root, pid, msg)
}

// hello greets the member at addr without joining (no member id).
func (c *Client) hello(ctx context.Context, addr string) (*messages.MemberHelloReply, error) {
	return c.helloDigest(ctx, addr, 0)
}

// helloDigest is hello carrying the digest of the view the client last
// learned (0: none); the reply has view_same set and no view when the
// member's view has it.
func (c *Client) helloDigest(ctx context.Context, addr string, viewDigest uint64) (*messages.MemberHelloReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	r, err := member.HelloDigest(ctx, c.system.Root, addr, viewDigest)
	if err != nil {
		return nil, err
	}
	if r.GetProtocolVersion() != ProtocolVersion {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "the member at %s speaks protocol version %d, this client %d",
			addr, r.GetProtocolVersion(), ProtocolVersion)
	}
	if len(r.GetView()) != len(r.GetViewAddresses()) || len(r.GetView()) != len(r.GetViewStores()) || r.GetShards() <= 0 || r.GetStore() == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member at %s sent an incomplete handshake", addr)
	}
	member.NameMembers(r.GetView(), r.GetViewStores())
	return r, nil
}

// Members lists the live members as the member in use sees them, sorted
// by id.
func (c *Client) Members(ctx context.Context) ([]MemberInfo, error) {
	r, err := c.liveHello(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]MemberInfo, len(r.GetView()))
	for i, id := range r.GetView() {
		out[i] = MemberInfo{ID: id, Address: r.GetViewAddresses()[i]}
	}
	return out, nil
}

// ListPage is one page of List.
type ListPage struct {
	Objects []*messages.ObjectSummary
	// Next continues the listing (pass it to List); "" after the last page.
	Next string
}

// List lists the cluster's objects, shard by shard, at most limit per
// page (1..1000; 0 means 1000), starting at cursor ("" from the start).
// Objects appear in id order within a shard, shards in index order; an
// object Put or deleted meanwhile may or may not appear. A shard that is
// moving is retried within ctx.
func (c *Client) List(ctx context.Context, cursor string, limit int) (ListPage, error) {
	if limit < 0 || limit > 1000 {
		return ListPage{}, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "list limit %d: want 1..1000", limit)
	}
	shard, after, err := parseCursor(cursor)
	if err != nil {
		return ListPage{}, err
	}
	r, err := c.liveHello(ctx)
	if err != nil {
		return ListPage{}, err
	}
	shards := int(r.GetShards())
	if limit == 0 {
		limit = 1000
	}
	var page ListPage
	for ; shard < shards; shard, after = shard+1, "" {
		reply, err := c.listShard(ctx, r, shard, after, limit-len(page.Objects))
		if err != nil {
			return ListPage{}, err
		}
		page.Objects = append(page.Objects, reply.GetObjects()...)
		if reply.GetMore() {
			page.Next = formatCursor(shard, page.Objects[len(page.Objects)-1].GetObjectId())
			return page, nil
		}
		if len(page.Objects) >= limit {
			if shard+1 < shards {
				page.Next = formatCursor(shard+1, "")
			}
			return page, nil
		}
	}
	return page, nil
}

// shardHost is where view r places shard j.
func shardHost(r *messages.MemberHelloReply, j int) *actor.PID {
	owners := ShardOwners(r.GetView(), int(r.GetShards()))
	for i, id := range r.GetView() {
		if id == owners[j] && i < len(r.GetViewStores()) {
			owner := r.GetViewStores()[i]
			return member.ShardPID(owner.GetAddress(), member.RootOf(owner), j)
		}
	}
	return nil
}

// listShard asks one shard for a page, retrying while it moves. Each retry
// asks the member for its view again: the view of the first hello may be
// one the members have left behind (a member joined since), and the host
// it names then never runs the shard.
func (c *Client) listShard(ctx context.Context, r *messages.MemberHelloReply, shard int, after string, limit int) (*messages.ListObjectsReply, error) {
	var last error
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		pid := shardHost(r, shard)
		if pid == nil {
			last = fmt.Errorf("the member's view places shard %d nowhere", shard)
		} else {
			res, err := c.request(ctx, pid, &messages.ListObjects{Shard: int32(shard), After: after, Limit: int32(limit)})
			if rep, ok := res.(*messages.ListObjectsReply); err == nil && ok {
				if rep.GetError() != nil {
					return nil, rep.GetError()
				}
				return rep, nil
			}
			if err == nil {
				err = fmt.Errorf("unexpected reply %s", actorutil.TypeName(res))
			}
			last = fmt.Errorf("directory shard %d at %s: %w", shard, pid.GetAddress(), err)
		}
		select {
		case <-ctx.Done():
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%v", last)
		case <-time.After(wait):
		}
		if fresh, err := c.liveHello(ctx); err == nil && int(fresh.GetShards()) == int(r.GetShards()) {
			r = fresh
		}
	}
}

// formatCursor and parseCursor: "SHARD/ID-AFTER".
func formatCursor(shard int, after string) string { return fmt.Sprintf("%d/%s", shard, after) }

func parseCursor(s string) (int, string, error) {
	if s == "" {
		return 0, "", nil
	}
	n, after, ok := strings.Cut(s, "/")
	var shard int
	if _, err := fmt.Sscanf(n, "%d", &shard); !ok || err != nil || shard < 0 {
		return 0, "", messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "list cursor %q: not one that List returned", s)
	}
	return shard, after, nil
}

// Status is a cluster's state as `hoplite status` shows it.
type Status struct {
	Members []MemberStatus
	// Shards is the number of directory shards; Owners[j] is shard j's
	// member.
	Shards int
	Owners []string
}

// MemberStatus is one member's store and measurements (Err if it did not
// answer).
type MemberStatus struct {
	MemberInfo
	Shards int // directory shards it hosts
	Node   *messages.NodeStatusReply
	Err    error
}

// Status asks every live member for its store's use and its measured
// network (latency L and bandwidth B), in parallel.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	r, err := c.liveHello(ctx)
	if err != nil {
		return nil, err
	}
	st := &Status{Shards: int(r.GetShards()), Owners: ShardOwners(r.GetView(), int(r.GetShards()))}
	st.Members = make([]MemberStatus, len(r.GetView()))
	done := make(chan struct{}, len(st.Members))
	for i, id := range r.GetView() {
		ms := &st.Members[i]
		ms.MemberInfo = MemberInfo{ID: id, Address: r.GetViewAddresses()[i]}
		store := r.GetViewStores()[i].PID()
		for _, o := range st.Owners {
			if o == id {
				ms.Shards++
			}
		}
		go func() {
			defer func() { done <- struct{}{} }()
			res, err := c.request(ctx, store, &messages.NodeStatus{})
			if n, ok := res.(*messages.NodeStatusReply); err == nil && ok {
				ms.Node = n
				return
			}
			if err == nil {
				err = fmt.Errorf("unexpected reply %s", actorutil.TypeName(res))
			}
			ms.Err = err
		}()
	}
	for range st.Members {
		<-done
	}
	slices.SortFunc(st.Members, func(a, b MemberStatus) int { return strings.Compare(a.ID, b.ID) })
	return st, nil
}

// Close stops the client's actor system (not an application's, see
// WithActorSystem). It returns within 2 s; a connection still being
// attempted then finishes stopping by itself.
func (c *Client) Close() {
	done := make(chan struct{})
	go func() {
		c.shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
}

func (c *Client) shutdown() {
	c.stopRefresh()
	if c.data != nil {
		c.data.Close()
	}
	if c.remote != nil {
		c.remote.Shutdown(false)
		c.system.Shutdown()
	}
}
