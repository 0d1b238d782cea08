package cluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster/identitylookup/disthash"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"
	"golang.org/x/net/netutil"

	barrierhost "github.com/hoplite-go/hoplite/actors/barrier"
	coordactor "github.com/hoplite-go/hoplite/actors/coordinator"
	shard "github.com/hoplite-go/hoplite/actors/directory"
	"github.com/hoplite-go/hoplite/actors/revoke"
	storeactor "github.com/hoplite-go/hoplite/actors/storenode"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/netmodel/estimator"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// ProtocolVersion is the version of the member protocol (the messages of
// the messages package and the placement rule). Members of different
// versions do not work together: the handshake keeps them apart.
// Version 2: Tombstones (a rebuilt shard learns the deleted ids) and the
// root generation on a Reduce's CreateObject. Version 3: barrier replicas
// are named by member id (every member hosts barriers).
const ProtocolVersion uint32 = 3

// Actor names under a member's node supervisor, the same on every member.
const (
	memberRoot   = "node"     // the node supervisor
	storeName    = "store"    // node/store: the store node
	revokeName   = "revoke"   // node/revoke: the failure broadcaster
	membersName  = "members"  // node/members: handshake, placement, shards
	barriersName = "barriers" // node/barriers: the barrier managers hosted here
)

// manageConns bounds the manage port's open connections (health checks
// of the other members, scrapes, profiles).
const manageConns = 512

// Membership providers (MemberConfig.Provider).
const (
	// ProviderAutomanaged: the members poll each other's HTTP health
	// endpoint; the membership is the seeds that answer. For a fixed list
	// of hosts.
	ProviderAutomanaged = "automanaged"
	// ProviderEtcd: the members register in an etcd server under a lease
	// and watch each other there. For hosts that come and go.
	ProviderEtcd = "etcd"
)

// maxRemoteMessage bounds a message on protoactor remote (gRPC's default
// is 4 MiB; an application may Put or Get an object through a remote
// store node). Bulk bytes between store nodes use the data plane.
const maxRemoteMessage = 256 << 20

// MemberConfig configures one member of a multi-process cluster. Zero
// fields take the defaults.
type MemberConfig struct {
	// Bind is this member's actor system (Proto.Actor remote, gRPC)
	// address, host:port. Required; the host is what the other members
	// dial, so not a wildcard.
	Bind string
	// ManagePort is the automanaged provider's HTTP port (its /_health
	// endpoint, which the other members poll; it listens on all
	// interfaces). Default: Bind's port + 1000.
	ManagePort int
	// Seeds are automanaged endpoints (host:manage-port) of the cluster's
	// members; this member's own is added. The automanaged provider's
	// membership is the seeds that answer; members exchange the seeds
	// they know, so one that reaches the cluster is enough. Unused with
	// etcd.
	Seeds []string
	// DataBind is where the direct-TCP data plane listens (default Bind's
	// host, a free port).
	DataBind string
	// Provider is the membership provider: "automanaged" (default) or
	// "etcd".
	Provider string
	// ProviderAddress is the etcd server's client endpoint, host:port
	// (default 127.0.0.1:2379).
	ProviderAddress string
	// ClusterName: members of other clusters are ignored (default "hoplite").
	ClusterName string
	// Shards is the number of directory shards of the whole cluster
	// (default 64). Every member must use the same number.
	Shards int
	// Capacity is this member's store size in bytes (default 1 GiB).
	Capacity int64
	// ChunkSize is the copy and streaming unit; 0 adapts it to the
	// measured bandwidth (storeactor.Config.ChunkSize).
	ChunkSize int
	// InlineLimit: smaller objects live in the directory (default 64 KiB).
	InlineLimit int64
	// DefaultTimeout bounds calls that carry no deadline (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer without progress (default 10s).
	StallTimeout time.Duration
	// Naive makes every Get fetch from the creator: the baseline without
	// collectives, for comparisons. It applies to this member's own Gets
	// and Reduces (a Reduce is gathered at its caller), so a naive cluster
	// sets it on every member.
	Naive bool
	// ReduceShape is coordinator.ShapeDAry (default: degree by the cost
	// model) or coordinator.ShapeChainLeaf.
	ReduceShape string
	// ReduceDegree, if > 0, forces the reduce tree degree (experiments).
	// Shape and degree are the coordinators' on this member, which serve
	// the Reduces whose target's directory shard is placed here: every
	// member of a cluster should use the same values.
	ReduceDegree int
	// AllReduceShape chooses the shape of AllReduces that could be sliced
	// (coordinator.Config.AllReduceShape): "" lets the cost model choose,
	// coordinator.ShapeSliced always reduce-scatters and all-gathers,
	// coordinator.ShapeDAry always reduces and then broadcasts. Like the
	// reduce shape, every member should use the same value.
	AllReduceShape string
	// ActorLocates sends every Locate as an actor message, as before the
	// data plane carried them (benchmarks: the comparison in one run).
	ActorLocates bool
	// UnbatchedReduceTasks makes this member's coordinators send each
	// reduce task as a message of its own, as before ReduceTaskBatch
	// (coordinator.Config.UnbatchedTasks; benchmarks: the start stagger
	// in one run).
	UnbatchedReduceTasks bool
	// NoRingGather makes this member's sliced AllReduces gather every
	// slice from its root, as before the ring all-gather
	// (coordinator.Config.NoRingGather; benchmarks: both in one run).
	NoRingGather bool
	// NoInlinePush makes this member's inline AllReduces leave their
	// participants to locate the result (coordinator.Config.NoInlinePush;
	// benchmarks: both in one run).
	NoInlinePush bool
	// ActorSubscribes makes this member's Reduce coordinators subscribe to
	// their sources by actor message, as before a Subscribe could travel
	// on the data plane (shard.ServeSubscribe; benchmarks: both in one
	// run).
	ActorSubscribes bool
	// LinkRate is this member's network link in bits per second, as its
	// operator knows it (a NIC's 10 Gbit/s; 0: not known). With it the
	// member paces the streams of sliced AllReduces at the link's TCP
	// payload rate (PayloadRate) and the cost model prices that shape
	// paced, and it is the bandwidth the model starts from until the
	// member measures one. It must be the rate of the link's bottleneck:
	// pacing above it brings back the contention it removes. The embedded
	// cluster (in-memory links) ignores it.
	LinkRate float64
	// RefreshInterval is how often the automanaged provider polls the
	// seeds (default 200ms). Crashes are detected faster than that (data
	// connections, remote endpoints); a graceful leave is seen within it.
	RefreshInterval time.Duration
	// HealthTimeout bounds each automanaged health check (default 2s).
	HealthTimeout time.Duration
	// HealthMisses is how many health checks in a row a member must miss
	// before the automanaged provider drops it (default 3; a refused
	// connection drops it at once). One slow answer on a loaded host is
	// not a failure.
	HealthMisses int
	// Pprof serves Go's profiles at /debug/pprof on the manage port (next
	// to /metrics, which is always there).
	Pprof bool
	// JoinTimeout bounds Join (default 30s).
	JoinTimeout time.Duration
	// TLSCert, TLSKey and TLSCA (PEM files), all three or none, run every
	// port of this member over mutual TLS: Proto.Actor remote, the data
	// plane and the manage port serve only peers whose client certificate
	// TLSCA signed, and this member presents TLSCert when it dials them.
	// Every member of a cluster uses the same CA. Default: plaintext.
	TLSCert, TLSKey, TLSCA string
	// Hooks are fault-injection points in the store node (tests).
	Hooks storeactor.Hooks
	// ShardHook runs before each message a directory shard of this member
	// receives (a hook that panics crashes that shard; tests).
	ShardHook func(shard string, msg any)
	// CoordinatorHook runs before each message a Reduce's coordinator on
	// this member receives, with the Reduce's id (target#nonce); a hook
	// that panics crashes that coordinator (tests).
	CoordinatorHook func(reduce string, msg any)
	// BarrierHook runs before each message a barrier manager on this
	// member receives, with the manager's id; a hook that panics crashes
	// that manager, which restarts and asks its peers (tests).
	BarrierHook func(manager string, msg any)
	// Log receives the member's logs and Proto.Actor's, at its own level.
	// Set Log or Logger, not both; with neither, the member logs warnings
	// and errors on stderr (`hoplite node` sets its level by -log-level).
	Log *logrus.Logger
	// Logger, if set, receives the member's logs and Proto.Actor's as
	// slog records (Proto.Actor's info records and the errors that are the
	// normal life of a cluster come at debug, repeats throttled). The
	// member asks its handler for the lowest level it enables once, when
	// it starts: records below it are not made.
	Logger *slog.Logger
	// ProtocolVersion overrides the version this member speaks (0: the
	// package's ProtocolVersion). Only for testing the handshake.
	ProtocolVersion uint32

	// noSeedExchange turns the automanaged seed exchange off (tests of
	// what members configured with different seeds see without it).
	noSeedExchange bool

	// tls is loaded from TLSCert, TLSKey and TLSCA by withDefaults.
	tls *tls.Config
	// protoLog is where Proto.Actor's records go (Logger's handler, or
	// Log's), set by withDefaults.
	protoLog slog.Handler

	// embedded is set by StartLocal: the member runs in a process with
	// others, finds them through an in-process membership and moves
	// object bytes on the in-memory data plane.
	embedded *embedding
}

// embedding is what differs for a member of the embedded cluster: only
// how members find each other and the data plane (DESIGN.md, "Embedded
// and distributed").
type embedding struct {
	id         string // the member id: node-i, node-i.k after k restarts
	membership *membership
	memory     *transport.Memory
	estimator  *estimator.Estimator // one process, one network: shared
}

func (c MemberConfig) withDefaults() (MemberConfig, string, int, error) {
	bad := func(format string, args ...any) (MemberConfig, string, int, error) {
		return c, "", 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, format, args...)
	}
	host, portStr, err := net.SplitHostPort(c.Bind)
	if err != nil {
		return bad("bind address %q: %v", c.Bind, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 || port == 0 && c.embedded == nil {
		return bad("bind address %q: the port must be 1..65535", c.Bind)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return bad("bind address %q: the other members dial this host, so it cannot be a wildcard", c.Bind)
	}
	if c.ManagePort == 0 {
		c.ManagePort = port + 1000
	}
	if c.ManagePort <= 0 || c.ManagePort > 65535 {
		return bad("manage port %d: must be 1..65535 (the default is the bind port + 1000)", c.ManagePort)
	}
	if c.ManagePort == port {
		return bad("manage port %d is the bind port", c.ManagePort)
	}
	if c.DataBind == "" {
		c.DataBind = net.JoinHostPort(host, "0")
	}
	if c.Provider == "" {
		c.Provider = ProviderAutomanaged
	}
	switch c.Provider {
	case ProviderAutomanaged:
	case ProviderEtcd:
		if c.ProviderAddress == "" {
			c.ProviderAddress = "127.0.0.1:2379"
		}
	case "consul":
		// Removed: no consul server could run in the project's tests, and
		// an untested provider is worse than none.
		return bad("membership provider %q is not supported (it was removed: untested); use automanaged or etcd", c.Provider)
	default:
		return bad("unknown membership provider %q (automanaged or etcd)", c.Provider)
	}
	if c.ClusterName == "" {
		c.ClusterName = "hoplite"
	}
	if c.Shards == 0 {
		c.Shards = 64
	}
	if c.Shards < 1 || c.Shards > 1<<16 {
		return bad("shards %d: must be 1..65536", c.Shards)
	}
	if c.Capacity <= 0 {
		c.Capacity = 1 << 30
	}
	if c.ReduceDegree < 0 {
		return bad("reduce degree %d: must be >= 1 to force the degree, or 0 for the cost model's", c.ReduceDegree)
	}
	switch c.ReduceShape {
	case "", coordinator.ShapeDAry, coordinator.ShapeChainLeaf:
	default:
		return bad("unknown reduce shape %q (%s or %s)", c.ReduceShape, coordinator.ShapeDAry, coordinator.ShapeChainLeaf)
	}
	switch c.AllReduceShape {
	case "", coordinator.ShapeDAry, coordinator.ShapeSliced:
	default:
		return bad("unknown allreduce shape %q (%s or %s)", c.AllReduceShape, coordinator.ShapeDAry, coordinator.ShapeSliced)
	}
	if c.LinkRate < 0 || math.IsNaN(c.LinkRate) || math.IsInf(c.LinkRate, 0) {
		return bad("link rate %v bit/s: want a positive rate, or 0 for unknown", c.LinkRate)
	}
	if c.InlineLimit == 0 {
		c.InlineLimit = 64 << 10
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = 30 * time.Second
	}
	if c.StallTimeout <= 0 {
		c.StallTimeout = 10 * time.Second
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = 200 * time.Millisecond
	}
	if c.HealthTimeout <= 0 {
		c.HealthTimeout = 2 * time.Second
	}
	if c.HealthMisses <= 0 {
		c.HealthMisses = 3
	}
	if c.JoinTimeout <= 0 {
		c.JoinTimeout = 30 * time.Second
	}
	if c.protoLog == nil {
		log, h, err := loggers(c.Log, c.Logger)
		if err != nil {
			return c, "", 0, err
		}
		c.Log, c.protoLog = log, h
	}
	if c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != "" {
		if c.TLSCert == "" || c.TLSKey == "" || c.TLSCA == "" {
			return bad("TLS needs a certificate, its key and the cluster's CA (--tls-cert, --tls-key, --tls-ca), got cert %q key %q CA %q", c.TLSCert, c.TLSKey, c.TLSCA)
		}
		if c.embedded != nil {
			return bad("TLS is for a cluster of processes; the embedded cluster's members share one process")
		}
		cfg, err := certs.Config(c.TLSCert, c.TLSKey, c.TLSCA)
		if err != nil {
			return bad("%v", err)
		}
		c.tls = cfg
	}
	if c.ProtocolVersion == 0 {
		c.ProtocolVersion = ProtocolVersion
	}
	self := net.JoinHostPort(host, strconv.Itoa(c.ManagePort))
	seeds := []string{}
	for _, s := range c.Seeds {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return bad("seed %q: %v", s, err)
		}
		seeds = append(seeds, s)
	}
	if !slices.Contains(seeds, self) {
		seeds = append(seeds, self)
	}
	slices.Sort(seeds)
	c.Seeds = slices.Compact(seeds)
	return c, host, port, nil
}

// Member is one member of a multi-process cluster: its node supervisor,
// store node, failure broadcaster, the directory shards placed on it and
// their reduce coordinators. Membership comes from Proto.Actor's cluster
// (a provider: automanaged by default); control messages travel on
// Proto.Actor remote, object bytes on a direct-TCP data plane. The Client
// and the messages are the embedded cluster's.
type Member struct {
	cfg       MemberConfig
	id        string
	log       *logrus.Entry
	system    *actor.ActorSystem
	pc        *pcluster.Cluster
	provider  pcluster.ClusterProvider
	data      transport.Transport // the data plane: direct TCP, or in memory when embedded
	closeData func()              // stops serving this member's objects
	store     *storenode.Store
	ref       *messages.NodeRef
	failures  *shard.FailureLog
	estimator *estimator.Estimator
	metrics   *memberMetrics
	coord     coordactor.ActorConfig

	table  atomic.Pointer[[]*actor.PID]        // shard j -> where it runs (copy on write)
	stores atomic.Pointer[[]*messages.NodeRef] // live store nodes, asked to republish
	live   atomic.Pointer[[]string]            // placement members, sorted
	peers  atomic.Pointer[peerIndex]           // reachable members by id, address, data address
	topo   atomic.Pointer[pcluster.ClusterTopology]
	// lastTopology is topo numbered (topologySeq counts the provider's
	// topologies in the order it published them): what the members
	// actor is sent.
	lastTopology atomic.Pointer[topologyUpdate]
	topologySeq  atomic.Uint64

	node, storePID, revokePID atomic.Pointer[actor.PID]
	membersPID                atomic.Pointer[actor.PID]

	health   *echo.Echo // the automanaged provider's HTTP server
	liveView *liveState // the live view: this member's recorder, and the hub its manage port serves
	// automanaged is the automanaged provider (nil with another one):
	// the seed exchange grows its polled hosts.
	automanaged *seedProvider
	suspects    chan suspicion
	quit        chan struct{}
	subs        []*eventstream.Subscription

	doneOnce sync.Once
	done     chan struct{}
	errMu    sync.Mutex
	err      error
	stopOnce sync.Once
	// crashed is set first thing by crash: its data plane then refuses
	// its own actors' requests (watchedTransport.down).
	crashed atomic.Bool
	// closing is set by quiesce: the whole cluster stops, and this member
	// takes no other member's departure for a failure or a leave.
	closing atomic.Bool
	// leaveOnce: one Leave (or Stop) leaves; a later one waits for it.
	leaveOnce sync.Once
}

// peerIndex resolves the members a failure may be reported about.
type peerIndex struct {
	byID   map[string]string // member id -> actor system address
	byAddr map[string]string // actor system address -> member id
	byData map[string]string // data address -> member id
	dataOf map[string]string // actor system address -> data address
}

// Join starts a member and joins the cluster: it returns once the member
// runs and has greeted the members its provider reports (or with an error:
// a port in use, an unreachable provider, members that speak another
// protocol version).
func Join(ctx context.Context, cfg MemberConfig) (*Member, error) {
	seeded := len(cfg.Seeds) > 0
	cfg, host, port, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	id := cfg.Bind + "#" + hex.EncodeToString(nonce[:])
	if cfg.embedded != nil {
		id = cfg.embedded.id
	}
	m := &Member{cfg: cfg, id: id, failures: &shard.FailureLog{},
		suspects: make(chan suspicion, 256), quit: make(chan struct{}), done: make(chan struct{})}
	m.liveView = newLiveState(m)
	m.log = logrus.NewEntry(cfg.Log).WithField("member", m.id)
	if seeded && cfg.Provider == ProviderEtcd {
		// Said, not refused: a deployment switching providers may keep
		// its flags for a while.
		m.log.Warn("seeds are ignored with the etcd provider: the members are the keys in etcd")
	}
	jctx, cancel := context.WithTimeout(ctx, cfg.JoinTimeout)
	defer cancel()
	if err := m.start(jctx, host, port); err != nil {
		m.teardown(false)
		return nil, err
	}
	return m, nil
}

// PayloadRate is what TCP over Ethernet (1500-byte frames, timestamps)
// carries of a link of bitsPerSecond, in bytes per second: 1448 payload
// bytes in every 1538 on the wire (preamble and gap, Ethernet, IP and TCP
// headers). A 400 Mbit/s testbed host (shaped by tc, which counts 1514
// bytes a frame) carries 47.8 MB/s, PayloadRate 47.1: just under, which is
// where a paced sliced AllReduce runs fastest (see transport.EgressPacer).
func PayloadRate(bitsPerSecond float64) float64 {
	if !(bitsPerSecond > 0) || math.IsInf(bitsPerSecond, 0) {
		return 0
	}
	return bitsPerSecond / 8 * 1448 / 1538
}

// pace is the rate of this member's paced streams (0: unpaced): its
// link's payload rate, on the TCP data plane only.
func (m *Member) pace() float64 {
	if m.cfg.embedded != nil {
		return 0
	}
	return PayloadRate(m.cfg.LinkRate)
}

func (m *Member) start(ctx context.Context, host string, port int) error {
	cfg := m.cfg
	// Proto.Actor panics on a port in use: check first, for a clear error.
	if port != 0 {
		if err := portFree("tcp", cfg.Bind); err != nil {
			return fmt.Errorf("member address %s is not available: %w", cfg.Bind, err)
		}
	}
	provider, err := m.newProvider(ctx, host)
	if err != nil {
		return err
	}
	m.provider = provider

	m.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return systemLogger(cfg.protoLog, m.id)
	}))
	// The member id is the system id: Proto.Actor's membership and block
	// list use it, and it is new on every start (a restarted member is a
	// new incarnation; the failed one stays failed).
	m.system.ID = m.id
	// B is the link's payload rate if the operator stated it (LinkRate),
	// else unknown (0) until this member measures a transfer: the reduce
	// cost model then builds the chain (plan.ChooseDegree), the shape
	// that moves each byte across each link once. A made-up 10 Gbit/s
	// against an L measured while the sources' Puts loaded the machine
	// chose binary trees: 32 MiB AllReduces of 2.5 s instead of 1.6 s on
	// the testbed, whenever the coordinator's member had measured no
	// transfer (a reduce measures B only on a leaf's parent).
	m.estimator = estimator.New(100*time.Microsecond, m.pace())
	if e := cfg.embedded; e != nil {
		m.estimator = e.estimator
	}
	m.store = storenode.NewStore(cfg.Capacity)
	m.metrics = newMemberMetrics(m)
	m.startView()
	served := &controlSource{countingSource: countingSource{Source: m.store, sent: m.metrics.sent}, m: m}
	var dataAddr string
	if e := cfg.embedded; e != nil {
		m.data = e.memory
		dataAddr, err = e.memory.Serve(m.id, served)
		if err != nil {
			return err
		}
		m.closeData = func() { e.memory.Unserve(dataAddr) }
	} else {
		tcp := transport.NewTCP(transport.TCPConfig{ListenAddr: cfg.DataBind, Log: func(format string, args ...any) {
			m.log.Debugf(format, args...)
		}, TLS: cfg.tls, Refused: func(peer string, err error) {
			logRefused(m.log.WithFields(logrus.Fields{"peer": peer, "port": "data"}), err)
		}, Pace: m.pace})
		m.data, m.closeData = tcp, tcp.Close
		dataAddr, err = tcp.Serve(m.id, served)
		if err != nil {
			return fmt.Errorf("data plane address %s is not available: %w", cfg.DataBind, err)
		}
	}

	rc := RemoteConfig(host, port, cfg.tls, m.log)
	pcfg := pcluster.Configure(cfg.ClusterName, provider, disthash.New(), rc)
	// No gossip: membership is the provider's topology, liveness is our
	// failure path (data plane, remote endpoints, topology, BMG notices),
	// and nothing here reads gossip state. Proto.Actor's gossip also
	// writes its remote block list without synchronisation on every
	// topology gossip (a data race in v0.0.0-20240822202345).
	pcfg.GossipInterval = 24 * time.Hour
	m.pc = pcluster.New(m.system, pcfg)
	m.subs = append(m.subs, m.system.EventStream.Subscribe(m.metrics.observe),
		m.system.EventStream.Subscribe(func(e any) {
			switch e := e.(type) {
			case *pcluster.ClusterTopology:
				// The provider publishes one topology at a time (under its
				// member list's lock), so the numbers follow its order.
				u := &topologyUpdate{topology: e, seq: m.topologySeq.Add(1)}
				m.topo.Store(e)
				m.lastTopology.Store(u)
				if pid := m.membersPID.Load(); pid != nil {
					m.system.Root.Send(pid, u)
				}
			case *remote.EndpointTerminatedEvent:
				m.suspect(suspicion{address: e.Address, why: "remote endpoint terminated"})
			}
		}))
	go m.detect()
	if err := startMember(m.pc); err != nil {
		return err
	}
	if m.automanaged != nil && !cfg.noSeedExchange {
		go m.exchangeSeeds(m.automanaged, net.JoinHostPort(host, strconv.Itoa(cfg.ManagePort)))
	}
	m.liveView.data.Store(&dataAddr)
	addr := m.system.Address()
	m.ref = &messages.NodeRef{NodeId: m.id, Address: addr, ActorId: memberRoot + "/" + storeName, DataAddress: dataAddr}
	selfStores := []*messages.NodeRef{m.ref}
	m.stores.Store(&selfStores)
	m.peers.Store(newPeerIndex())
	table := make([]*actor.PID, cfg.Shards)
	for j := range table {
		table[j] = shardPID(addr, j)
	}
	m.table.Store(&table)
	m.coord = coordactor.ActorConfig{Self: m.ref, ShardFor: m.shardFor, PushAt: m.pushAt, SubscribeAt: m.subscribeAt, CallData: m.callData, Estimator: m.estimator, Log: m.log,
		BeforeReceive: cfg.CoordinatorHook,
		Reduce: coordinator.Config{InlineLimit: cfg.InlineLimit, Shape: cfg.ReduceShape, ForceDegree: cfg.ReduceDegree,
			AllReduceShape: cfg.AllReduceShape, Paced: m.pace() > 0, UnbatchedTasks: cfg.UnbatchedReduceTasks,
			NoRingGather: cfg.NoRingGather, NoInlinePush: cfg.NoInlinePush}}

	children := []child{
		{name: storeName, props: storeactor.NewProps(storeactor.Config{
			Self: m.ref, Store: m.store, ShardFor: m.shardFor, LocateAt: m.locateAt,
			Transport: &watchedTransport{Transport: m.data, report: m.suspectData, metrics: m.metrics, peerOf: m.peerByData, down: m.crashed.Load},
			ChunkSize: cfg.ChunkSize, InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout,
			StallTimeout: cfg.StallTimeout, Naive: cfg.Naive, Hooks: cfg.Hooks, Log: m.log, Estimator: m.estimator,
		})},
		{name: revokeName, props: revoke.NewActorProps(revoke.ActorConfig{Self: m.id, Peer: m.revokePeer,
			Deliver: m.deliver, Admit: m.admitNotice, Log: m.log})},
		{name: membersName, props: newMembersProps(m)},
		{name: barriersName, props: barrierhost.NewHostProps(barrierhost.HostConfig{Log: m.log, BeforeReceive: cfg.BarrierHook})},
	}
	node, err := m.system.Root.SpawnNamed(nodeSupervisorProps(children), memberRoot)
	if err != nil {
		return fmt.Errorf("start the node supervisor: %w", err)
	}
	m.node.Store(node)
	if _, err := m.system.Root.RequestFuture(node, ready{}, 10*time.Second).Result(); err != nil {
		return fmt.Errorf("the node supervisor did not start: %w", err)
	}
	m.storePID.Store(actor.NewPID(addr, memberRoot+"/"+storeName))
	m.revokePID.Store(actor.NewPID(addr, memberRoot+"/"+revokeName))
	members := actor.NewPID(addr, memberRoot+"/"+membersName)
	m.membersPID.Store(members)
	// The topologies published before the members actor was known. This
	// send races with the subscription's, which may already have sent a
	// newer one: the members actor applies only topologies newer than
	// the last it applied.
	if u := m.lastTopology.Load(); u != nil {
		m.system.Root.Send(members, u)
	}

	deadline, _ := ctx.Deadline()
	f := m.system.Root.RequestFuture(members, awaitSettled{}, max(time.Until(deadline), time.Millisecond))
	var res any
	var ferr error
	settledCh := make(chan struct{})
	go func() { // ends by the future's timeout at the latest
		res, ferr = f.Result()
		close(settledCh)
	}()
	select {
	case <-settledCh:
	case <-ctx.Done():
		// Cancelled (SIGTERM): the handshakes need not finish.
		if ctx.Err() == context.Canceled {
			return fmt.Errorf("join: %w", ctx.Err())
		}
		<-settledCh // the deadline: the future says so too
	}
	if err := ferr; err != nil {
		return fmt.Errorf("join: the cluster did not answer within %v: %w", cfg.JoinTimeout, err)
	}
	s, ok := res.(settled)
	if !ok {
		return fmt.Errorf("join: unexpected answer %T", res)
	}
	if s.incompatible > 0 && s.incompatible >= s.compatible {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"join: this member (protocol version %d, %d shards) is incompatible with the cluster: %s",
			cfg.ProtocolVersion, cfg.Shards, strings.Join(s.reasons, "; "))
	}
	fields := logrus.Fields{"address": addr, "data": dataAddr, "manage_port": cfg.ManagePort,
		"members": len(m.Members()), "shards": cfg.Shards}
	// A benchmark's logs say which system a member was.
	if cfg.Naive {
		fields["naive"] = true
	}
	if cfg.ReduceDegree > 0 {
		fields["reduce_degree"] = cfg.ReduceDegree
	}
	if cfg.ReduceShape != "" {
		fields["reduce_shape"] = cfg.ReduceShape
	}
	if cfg.AllReduceShape != "" {
		fields["allreduce_shape"] = cfg.AllReduceShape
	}
	if cfg.UnbatchedReduceTasks {
		fields["unbatched_reduce_tasks"] = true
	}
	if cfg.NoRingGather {
		fields["no_ring_gather"] = true
	}
	if cfg.NoInlinePush {
		fields["no_inline_push"] = true
	}
	if cfg.ActorSubscribes {
		fields["actor_subscribes"] = true
	}
	if cfg.ActorLocates {
		fields["actor_locates"] = true
	}
	if p := m.pace(); p > 0 {
		fields["pace_bytes_per_second"] = p
	}
	m.log.WithFields(fields).Info("member joined the cluster")
	return nil
}

// remoteConfig is the plaintext Proto.Actor remote configuration (the
// embedded cluster's application system).
func remoteConfig(host string, port int) *remote.Config {
	return RemoteConfig(host, port, nil, nil)
}

// startMember runs Proto.Actor's StartMember, which panics on errors.
func startMember(pc *pcluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok { // the provider's error, typed
				err = fmt.Errorf("start the cluster member: %w", e)
				return
			}
			err = fmt.Errorf("start the cluster member: %v", r)
		}
	}()
	pc.StartMember()
	return nil
}

func portFree(network, addr string) error {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return err
	}
	return ln.Close()
}

func (m *Member) newProvider(ctx context.Context, host string) (pcluster.ClusterProvider, error) {
	cfg := m.cfg
	if e := cfg.embedded; e != nil {
		return e.membership.provider(), nil
	}
	if cfg.Provider == ProviderAutomanaged {
		e, err := m.manageServer(host, "automanaged port")
		if err != nil {
			return nil, err
		}
		if err := m.checkSeeds(ctx, net.JoinHostPort(host, strconv.Itoa(cfg.ManagePort))); err != nil {
			_ = e.Listener.Close()
			return nil, err
		}
		// Our own automanaged provider (seed_provider.go): it serves
		// /_health and starts the manage port's server in StartMember.
		p := newSeedProvider(e, seedProviderConfig{Cluster: cfg.ClusterName, ManagePort: cfg.ManagePort, Seeds: cfg.Seeds,
			Refresh: cfg.RefreshInterval, Timeout: cfg.HealthTimeout, Misses: cfg.HealthMisses, TLS: cfg.tls,
			Log: m.log.WithField("provider", ProviderAutomanaged)})
		m.serveSeeds(e, p)
		m.automanaged = p
		return p, nil
	}
	// The manage port serves /metrics (and /debug/pprof) with etcd too;
	// nothing else starts its server.
	e, err := m.manageServer(host, "manage port")
	if err != nil {
		return nil, err
	}
	// Our own etcd provider (etcd.go): it checks the server with a
	// Status request under the join's deadline.
	p, err := newEtcdProvider(ctx, cfg.ProviderAddress, cfg.ClusterName, m.log)
	if err != nil {
		return nil, err // teardown closes the manage port's listener
	}
	go func() { _ = e.StartServer(e.Server) }() // until teardown closes it
	return p, nil
}

// manageServer is the member's HTTP server on its manage port: /metrics
// (and /debug/pprof with Pprof); the automanaged provider adds /_health
// and the seed exchange and starts it. It listens on the bind host rather
// than all interfaces, quiet, before anything else starts, so a port in
// use is a clear error here (the provider would only log it); what names
// the port in that error.
func (m *Member) manageServer(host, what string) (*echo.Echo, error) {
	cfg := m.cfg
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(cfg.ManagePort)))
	if err != nil {
		return nil, fmt.Errorf("%s %d is not available: %w", what, cfg.ManagePort, err)
	}
	// Bounded: at most manageConns connections at once (more wait in
	// the kernel's backlog), each with deadlines for its request.
	ln = netutil.LimitListener(ln, manageConns)
	if cfg.tls != nil {
		ln = &tlsManageListener{Listener: ln, cfg: cfg.tls, log: m.log, port: cfg.ManagePort}
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Logger.SetOutput(io.Discard)
	e.Listener = ln
	e.Server.ReadHeaderTimeout = handshakeTimeout
	e.Server.ReadTimeout = 2 * handshakeTimeout
	e.Server.WriteTimeout = 2 * time.Minute // a 30 s CPU profile fits
	e.Server.IdleTimeout = time.Minute
	m.manageRoutes(e)
	m.health = e
	return e, nil
}

// locateAt is where a Locate to shard goes on the data plane: its
// member's data address, or "" for a shard on this member (an actor
// message in process is cheaper than any socket) or on a member whose
// data address this member does not know yet.
func (m *Member) locateAt(shard *actor.PID) string {
	if m.cfg.ActorLocates || shard == nil || shard.GetAddress() == m.system.Address() {
		return ""
	}
	if idx := m.peers.Load(); idx != nil {
		return idx.dataOf[shard.GetAddress()]
	}
	return ""
}

// controlSource is what a member serves on the data plane: its store's
// objects, and the Locates of other members for the shards it hosts.
type controlSource struct {
	countingSource
	m *Member
}

// Control implements transport.Controller.
func (s *controlSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	m := s.m
	if kind == messages.ControlPing {
		return nil, nil
	}
	if kind == messages.ControlPush {
		return m.servePush(ctx, req)
	}
	if kind == messages.ControlSubscribe {
		return m.serveSubscribe(ctx, req)
	}
	if kind == messages.ControlLive {
		return m.serveLive(req)
	}
	if kind != messages.ControlLocate {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "unknown control request kind %q", kind)
	}
	if m.table.Load() == nil || m.storePID.Load() == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
	}
	b, err := shard.ServeLocate(ctx, m.system.Root, m.shardFor, req)
	result := "ok"
	switch {
	case err != nil:
		result = messages.AsError(err).GetCode().String()
	case len(b) == 0:
		result = "forwarded" // the answer names a sender: it went as an actor message
	}
	m.metrics.locates.WithLabelValues(result).Inc()
	return b, err
}

// subscribeAt is the data address of the member hosting shard, to which a
// coordinator's Subscribe goes as a control request; "" sends it as an
// actor message (a shard on this member, or one whose data address this
// member does not know yet).
func (m *Member) subscribeAt(shard *actor.PID) string {
	if m.cfg.ActorSubscribes {
		return ""
	}
	return m.locateAt(shard)
}

// serveSubscribe hands a Reduce coordinator's Subscribe on the data plane
// to the source's shard here (see shard.ServeSubscribe).
func (m *Member) serveSubscribe(ctx context.Context, req []byte) ([]byte, error) {
	if m.table.Load() == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
	}
	b, err := shard.ServeSubscribe(ctx, m.system.Root, m.shardFor, req)
	result := "sent"
	switch {
	case err != nil:
		result = messages.AsError(err).GetCode().String()
	case len(b) > 0:
		result = "inline" // an empty SubscribeAnswer encodes to nothing
	}
	m.metrics.subscribes.WithLabelValues(result).Inc()
	return b, err
}

func (m *Member) shardFor(id string) *actor.PID {
	t := *m.table.Load()
	return t[directory.ShardIndex(id, len(t))]
}

func (m *Member) storeNodes() []*messages.NodeRef { return *m.stores.Load() }

func (m *Member) shardProps(j int, rebuilt bool) *actor.Props {
	return shard.NewShardProps(shard.ShardConfig{
		Table: directory.TableConfig{InlineLimit: m.cfg.InlineLimit}, Log: m.log,
		NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID, shardStopped func() bool) *actor.Props {
			return coordactor.NewProps(m.coord, id, start, requester, shardStopped)
		},
		Index: j, Count: m.cfg.Shards, Nodes: m.storeNodes, Failures: m.failures, Rebuilt: rebuilt,
		BeforeReceive: m.cfg.ShardHook, Host: m.id,
	})
}

// revokePeer is where a member's broadcaster lives.
func (m *Member) revokePeer(id string) *actor.PID {
	addr := (*m.peers.Load()).byID[id]
	if id == m.id {
		addr = m.system.Address()
	}
	if addr == "" {
		return nil
	}
	return actor.NewPID(addr, memberRoot+"/"+revokeName)
}

func (m *Member) hello() *messages.MemberHello {
	return &messages.MemberHello{ProtocolVersion: m.cfg.ProtocolVersion, Shards: int32(m.cfg.Shards), MemberId: m.id, Store: m.ref}
}

// compatible decides the handshake.
func (m *Member) compatible(version uint32, shards int32) (bool, string) {
	if version != m.cfg.ProtocolVersion || int(shards) != m.cfg.Shards {
		return false, fmt.Sprintf("protocol version %d with %d shards, but %s speaks protocol version %d with %d shards",
			version, shards, m.id, m.cfg.ProtocolVersion, m.cfg.Shards)
	}
	return true, ""
}

// ID is this member's id in the cluster: its bind address and a nonce
// (every start is a new incarnation). It is also its store's node id.
func (m *Member) ID() string { return m.id }

// Address is the actor system's address (host:port).
func (m *Member) Address() string { return m.system.Address() }

// DataAddress is the data plane's bound address.
func (m *Member) DataAddress() string { return m.ref.GetDataAddress() }

// PingData makes one bare control round trip on the data plane to the
// member whose data address is addr: what a Locate there costs before
// the directory does anything. ctx must have a deadline.
func (m *Member) PingData(ctx context.Context, addr string) error {
	if m.data == nil {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s: no data plane yet", m.id)
	}
	_, err := m.data.Call(ctx, addr, messages.ControlPing, nil)
	return err
}

// Node is this member's store node as directory records name it.
func (m *Member) Node() *messages.NodeRef { return m.ref }

// System is the member's actor system: application actors are spawned in
// it and subscribe to its EventStream (events.NodeFailed and the rest).
func (m *Member) System() *actor.ActorSystem { return m.system }

// StoreNode is this member's store node: application actors send it Put,
// Get, Delete and Reduce, as on the embedded cluster.
func (m *Member) StoreNode() *actor.PID { return m.storePID.Load() }

// Client is the Go API of this member's store node.
func (m *Member) Client() *storenode.Client {
	return storenode.NewClient(m.system.Root, m.StoreNode(), m.cfg.DefaultTimeout)
}

// ClientOf is a client of another member's store node, through this
// member's actor system (requests and replies cross the processes on
// Proto.Actor remote; tools and tests use it).
func (m *Member) ClientOf(node *messages.NodeRef) *storenode.Client {
	return storenode.NewClient(m.system.Root, node.PID(), m.cfg.DefaultTimeout)
}

// Members are the store nodes of the members shards are placed on (this
// one included), sorted by member id.
func (m *Member) Members() []*messages.NodeRef {
	live := *m.live.Load()
	out := make([]*messages.NodeRef, 0, len(live))
	for _, s := range m.storeNodes() {
		if slices.Contains(live, s.GetNodeId()) {
			out = append(out, s)
		}
	}
	return out
}

// WaitMembers waits until n members (this one included) are live here.
func (m *Member) WaitMembers(ctx context.Context, n int) error {
	for {
		if len(*m.live.Load()) >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d members (have %d): %w", n, len(*m.live.Load()), ctx.Err())
		case <-m.done:
			return m.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// ShardOwner is the member whose directory shard holds object id.
func (m *Member) ShardOwner(id string) string {
	t := *m.table.Load()
	pid := t[directory.ShardIndex(id, len(t))]
	if pid.GetAddress() == m.system.Address() {
		return m.id
	}
	return (*m.peers.Load()).byAddr[pid.GetAddress()]
}

// ViewOf asks the member whose actor system is at address for its live
// members (sorted ids), through the handshake.
func (m *Member) ViewOf(ctx context.Context, address string) ([]string, error) {
	d := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = time.Until(dl)
	}
	if d <= 0 {
		return nil, ctx.Err()
	}
	res, err := m.system.Root.RequestFuture(actor.NewPID(address, memberRoot+"/"+membersName),
		&messages.MemberHello{ProtocolVersion: m.cfg.ProtocolVersion, Shards: int32(m.cfg.Shards)}, d).Result()
	if err != nil {
		return nil, err
	}
	r, ok := res.(*messages.MemberHelloReply)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", res)
	}
	return r.GetView(), nil
}

// Done is closed when the member has stopped: by Stop or Leave, or by
// itself (the others declared it failed; Err says so).
func (m *Member) Done() <-chan struct{} { return m.done }

// Err is why the member stopped by itself, or nil.
func (m *Member) Err() error {
	m.errMu.Lock()
	defer m.errMu.Unlock()
	return m.err
}

// fail stops the member on its own: the others declared it failed, and a
// failed member does not come back under the same incarnation.
func (m *Member) fail(err error) {
	m.errMu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.errMu.Unlock()
	m.log.WithError(err).Error("member stopping")
	// Not a leave: the others declared it failed already.
	go m.teardown(false)
}

// Stop leaves the cluster and stops the member: Leave, bounded by
// DefaultTimeout, for a program that has no use for the lost objects'
// ids (they are logged). For the other members it is a leave, not a
// failure: they move its shards and spread no failure notice.
func (m *Member) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.DefaultTimeout)
	defer cancel()
	_, _ = m.Leave(ctx)
}

// Leave leaves the cluster gracefully: the directory shards move off this
// member while its store still serves their rebuild, objects whose only
// copy is here are reported lost (deleted from the directory and logged,
// so Gets of them fail at once instead of waiting), then the member stops.
// A member that is the last of its cluster hands nothing off: everything
// it holds is lost. It returns the ids of the lost objects. A ctx
// without a deadline gets DefaultTimeout. A second Leave (or Stop) waits
// for the first, within ctx, and returns no ids.
func (m *Member) Leave(ctx context.Context) ([]string, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, m.cfg.DefaultTimeout)
		defer cancel()
	}
	first := false
	m.leaveOnce.Do(func() { first = true })
	select {
	case <-m.done:
		first = false // stopped already (crashed, expelled): nothing to leave
	default:
	}
	if !first {
		select {
		case <-m.done:
			return nil, nil
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the member to stop: %w", ctx.Err())
		}
	}
	lost, err := m.leave(ctx)
	m.teardown(true)
	return lost, err
}

// quiesce makes this member ignore the departure of every other one:
// the whole cluster stops (Local.Stop), and members that stop together
// neither failed nor left. No failure notice, no moved or rebuilt
// shard, no NodeFailed.
func (m *Member) quiesce() {
	m.closing.Store(true)
	m.failures.Close()
}

func (m *Member) teardown(graceful bool) {
	m.stopOnce.Do(func() {
		m.failures.Close()
		if m.pc != nil && graceful {
			// Tell the provider first: the others see us leave.
			safely(func() { _ = m.provider.Shutdown(true) })
		}
		if node := m.node.Load(); node != nil {
			if err := stopUntilGone(m.system, node); err != nil {
				m.log.WithError(err).Warn("the member's actors did not stop in time")
			}
		}
		close(m.quit)
		if m.system != nil {
			for _, s := range m.subs {
				m.system.EventStream.Unsubscribe(s)
			}
		}
		if m.closeData != nil {
			m.closeData()
		}
		if m.pc == nil && m.provider != nil {
			// Created but never started (a later step of the start
			// failed): it still holds a client connection.
			safely(func() { _ = m.provider.Shutdown(false) })
		}
		if m.pc != nil {
			if !graceful {
				safely(func() { _ = m.provider.Shutdown(true) })
			}
			safely(func() { m.pc.Gossip.Shutdown() })
			if m.pc.IdentityLookup != nil {
				safely(m.pc.IdentityLookup.Shutdown)
			}
			if m.pc.Remote != nil {
				safely(func() { m.pc.Remote.Shutdown(false) })
			}
		}
		if m.liveView != nil {
			m.liveView.hub.Close()
		}
		if m.health != nil {
			_ = m.health.Close()
			_ = m.health.Listener.Close() // when the provider never started
		}
		if m.system != nil {
			m.system.Shutdown()
		}
		m.doneOnce.Do(func() { close(m.done) })
	})
}

// crash stops the member the way SIGKILL stops a process: first nobody
// can reach it any more (its remote endpoints close, its data plane stops
// serving, its membership entry goes), then its actors, which can no
// longer tell anyone, are stopped to free the process's resources. The
// other members learn of it only through their own failure path.
func (m *Member) crash(gone error) {
	m.stopOnce.Do(func() {
		m.crashed.Store(true) // first: nothing it runs reaches another member any more
		m.failures.Close()
		if m.pc != nil && m.pc.Remote != nil {
			safely(func() { m.pc.Remote.Shutdown(false) })
		}
		if m.closeData != nil {
			m.closeData()
		}
		if m.store != nil {
			m.store.Fail(gone)
		}
		if m.provider != nil {
			safely(func() { _ = m.provider.Shutdown(false) })
		}
		if node := m.node.Load(); node != nil {
			if err := stopUntilGone(m.system, node); err != nil {
				m.log.WithError(err).Warn("crash: the member's actors did not stop in time")
			}
		}
		close(m.quit)
		for _, s := range m.subs {
			m.system.EventStream.Unsubscribe(s)
		}
		if m.pc != nil {
			safely(func() { m.pc.Gossip.Shutdown() })
			if m.pc.IdentityLookup != nil {
				safely(m.pc.IdentityLookup.Shutdown)
			}
		}
		if m.system != nil {
			m.system.Shutdown()
		}
		m.doneOnce.Do(func() { close(m.done) })
	})
}

// safely runs a Proto.Actor shutdown step that may panic on a half-started
// cluster.
func safely(f func()) {
	defer func() { _ = recover() }()
	f()
}

var errNotRunning = errors.New("member is not running")

func newPeerIndex() *peerIndex {
	return &peerIndex{byID: map[string]string{}, byAddr: map[string]string{}, byData: map[string]string{}, dataOf: map[string]string{}}
}
