package cluster

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// ProtocolVersion is the version of the member protocol (the messages of
// the messages package and the placement rule). Members of different
// versions do not work together: the handshake keeps them apart
// (internal/member says what each version changed). Equal to the
// member's own, which the tests check, as for every constant here.
const ProtocolVersion uint32 = 10

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

// The shapes of a Reduce: what a reply's Plan.Shape names, and what the
// benchmarks' experiments may force (internal/experiments).
const (
	// ShapeDAry is a d-ary tree whose degree the cost model T(d) picks
	// (the default ReduceShape); as an AllReduceShape, reduce and then
	// broadcast.
	ShapeDAry = "d-ary"
	// ShapeChainLeaf is a binary tree whose leaves are chains (a
	// ReduceShape).
	ShapeChainLeaf = "chain-leaf"
	// ShapeSliced reduce-scatters over rotated chains and all-gathers
	// around a ring (an AllReduceShape).
	ShapeSliced = "sliced"
	// ShapeInline names the plan of a Reduce of small objects, reduced
	// by its coordinator without a tree; it is chosen by size, not set.
	ShapeInline = "inline"
)

// DefaultWarmMemory is MemberConfig.WarmMemory's default: what one
// AllReduce of 8 x 32 MiB makes per member (its source, sixteen slices of
// 4 MiB, the result), the largest working set of the project's
// benchmarks.
const DefaultWarmMemory = 128 << 20

// EtcdLeaseTTL is how long, in seconds, a member's etcd registration
// outlives the member (its lease): the others see a member that stopped
// answering etcd leave within it.
const EtcdLeaseTTL = 5

// ErrExpelled is why a member stops by itself: the others declared it
// failed while it was alive (paused, or cut off, longer than the health
// checks allow). That incarnation cannot come back: `hoplite node` rejoins
// as a new one by itself; a program that embeds a Member Joins again.
var ErrExpelled = member.ErrExpelled

// ProviderError says that a membership provider's server (etcd) could not
// be used: which server (Provider, "etcd"), at which address (Address,
// host:port), doing what (Op, in words), and the client library's error
// (Err, which Unwrap returns: context.DeadlineExceeded when the server did
// not answer in time). It matches messages.ErrUnavailable with errors.Is.
type ProviderError = member.ProviderError

// MemberConfig configures one member of a multi-process cluster. Zero
// fields take the defaults.
type MemberConfig struct {
	// Bind is this member's actor system (Proto.Actor remote, gRPC)
	// address, host:port. Required; the host is what the other members
	// dial, so not a wildcard.
	Bind string
	// ManagePort is the member's HTTP port, on Bind's host: /metrics,
	// the live view at /live/, /debug/pprof with Pprof, and with the
	// automanaged provider its /_health endpoint, which the other members
	// poll. Default: Bind's port + 1000.
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
	// measured bandwidth (about 5 ms of transfer per chunk; 256 KiB until
	// a transfer was measured); a fixed size is used as given.
	ChunkSize int
	// InlineLimit: smaller objects live in the directory (default 64 KiB).
	InlineLimit int64
	// LocateDeputies is how many groups of Locate deputies the members
	// form: a member sends its Locates of another member's directory
	// shard through its group's deputy, which sends a hot small object's
	// Locates on in batches (docs/architecture.md, "Locate deputies").
	// 0: 16 from 512 members on, none below; -1: none.
	LocateDeputies int
	// DefaultTimeout bounds calls that carry no deadline (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer without progress (default 10s).
	StallTimeout time.Duration
	// WarmMemory is how many bytes of memory for large object buffers
	// the warm-up faults in and keeps for the buffers of 4 MiB or more
	// the process makes (bufalloc.Reserve, once per process, so the
	// members of an embedded cluster share it): DefaultWarmMemory if 0,
	// none if negative. It is held for the life of the
	// process, and serves the next buffers again whenever the ones cut
	// from it are unreachable. Up to as much of the memory of large
	// buffers that nothing
	// references any more is then kept for the next ones (bufalloc.Keep)
	// instead of going back to the kernel.
	WarmMemory int64
	// LinkRate is this member's network link in bits per second, as its
	// operator knows it (a NIC's 10 Gbit/s; 0: not known). With it the
	// member paces the streams of sliced AllReduces at the link's TCP
	// payload rate (PayloadRate) and the cost model prices that shape
	// paced, and it is the bandwidth the model starts from until the
	// member measures one; the member's directory shards reckon with it
	// how long their inline answers' bytes queue on its uplink
	// (directory.AnswerWithBytes). It must be the rate of the link's
	// bottleneck: pacing above it brings back the contention it removes.
	// The embedded cluster (in-memory links) ignores it.
	LinkRate float64
	// LinkBurst is how many bytes the link passes at once after it idled,
	// above its rate, if a token-bucket shaper sets it (a tc tbf's burst,
	// as the testbed's; 0: none, every byte waits for the rate). It needs
	// LinkRate. The cost model then charges a reduce tree's levels only
	// for what the burst does not pass (plan.FillShaped), and the
	// member's directory shards price a broadcast's hops the same way
	// (plan.BroadcastLink.Burst): behind the testbed's shaper, a chain of
	// small chunks costs its latencies, not a chunk's time a hop.
	LinkBurst int64
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
	// Every member of a cluster uses the same CA. Default: plaintext. The
	// etcd provider's connection has files of its own (EtcdCert).
	TLSCert, TLSKey, TLSCA string
	// EtcdCert, EtcdKey and EtcdCA (PEM files) run the etcd provider's
	// client over TLS; any of them turns it on, and they are for the etcd
	// provider only. EtcdCA verifies the etcd server: it is etcd's CA,
	// usually not TLSCA (empty: the system's roots). EtcdCert and EtcdKey,
	// both or neither, are the client certificate an etcd server with
	// client certificate auth requires. Default: plaintext, which a member
	// with TLSCert logs a warning about when it joins (whoever reaches
	// etcd can then list, add and remove members).
	EtcdCert, EtcdKey, EtcdCA string
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

	// exp are the experiments (internal/experiments) a benchmark or a
	// test turned on for this member.
	exp experiments.Set
	// hooks are the fault-injection points (internal/testhooks) a test
	// set for this member.
	hooks testhooks.Set
}

// member is c as package member takes it: the same fields, and the
// experiments and fault-injection points only this module sets.
func (c MemberConfig) member() member.MemberConfig {
	var mc member.MemberConfig
	mc.Bind = c.Bind
	mc.ManagePort = c.ManagePort
	mc.Seeds = c.Seeds
	mc.DataBind = c.DataBind
	mc.Provider = c.Provider
	mc.ProviderAddress = c.ProviderAddress
	mc.ClusterName = c.ClusterName
	mc.Shards = c.Shards
	mc.Capacity = c.Capacity
	mc.ChunkSize = c.ChunkSize
	mc.InlineLimit = c.InlineLimit
	mc.LocateDeputies = c.LocateDeputies
	mc.DefaultTimeout = c.DefaultTimeout
	mc.StallTimeout = c.StallTimeout
	mc.WarmMemory = c.WarmMemory
	mc.LinkRate = c.LinkRate
	mc.LinkBurst = c.LinkBurst
	mc.RefreshInterval = c.RefreshInterval
	mc.HealthTimeout = c.HealthTimeout
	mc.HealthMisses = c.HealthMisses
	mc.Pprof = c.Pprof
	mc.JoinTimeout = c.JoinTimeout
	mc.TLSCert = c.TLSCert
	mc.TLSKey = c.TLSKey
	mc.TLSCA = c.TLSCA
	mc.EtcdCert = c.EtcdCert
	mc.EtcdKey = c.EtcdKey
	mc.EtcdCA = c.EtcdCA
	mc.Log = c.Log
	mc.Logger = c.Logger
	*experiments.In(&mc) = c.exp
	*testhooks.In(&mc) = c.hooks
	return mc
}

// Member is one member of a multi-process cluster: its node supervisor,
// store node, failure broadcaster, the directory shards placed on it and
// their reduce coordinators. Membership comes from Proto.Actor's cluster
// (a provider: automanaged by default); control messages travel on
// Proto.Actor remote, object bytes on a direct-TCP data plane. The Client
// and the messages are the embedded cluster's.
type Member struct {
	m *member.Member
}

// wrap is m's face, nil for nil.
func wrap(m *member.Member) *Member {
	if m == nil {
		return nil
	}
	return &Member{m: m}
}

// Join starts a member and joins the cluster: it returns once the member
// runs and has greeted the members its provider reports (or with an error:
// a port in use, an unreachable provider (*ProviderError), members that
// speak another protocol version).
func Join(ctx context.Context, cfg MemberConfig) (*Member, error) {
	m, err := member.Join(ctx, cfg.member())
	if err != nil {
		return nil, err
	}
	return wrap(m), nil
}

// Client is the Go API of this member's store node.
func (m *Member) Client() *storenode.Client {
	return storenode.NewClient(m.m.System().Root, m.m.StoreNode(), m.m.DefaultTimeout())
}

// ClientOf is a client of another member's store node, through this
// member's actor system (requests and replies cross the processes on
// Proto.Actor remote; tools and tests use it).
func (m *Member) ClientOf(node *messages.NodeRef) *storenode.Client {
	return storenode.NewClient(m.m.System().Root, node.PID(), m.m.DefaultTimeout())
}

// BarrierHosts lists the barrier hosts of the members live in this
// member's view (barrier.Cluster).
func (m *Member) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	return barrierHosts(m.m.LiveBarrierHosts()), nil
}

// barrierHosts is hosts as package barrier takes them.
func barrierHosts(hosts []member.BarrierHost) []barrier.MemberHost {
	out := make([]barrier.MemberHost, len(hosts))
	for i, h := range hosts {
		out[i] = barrier.MemberHost{Member: h.Member, PID: h.PID}
	}
	return out
}

// ID is this member's id in the cluster: its bind address and a nonce
// (every start is a new incarnation). It is also its store's node id.
func (m *Member) ID() string { return m.m.ID() }

// Address is the actor system's address (host:port).
func (m *Member) Address() string { return m.m.Address() }

// DataAddress is this incarnation's data plane address, as its NodeRef
// carries it: on TCP "host:port#<incarnation>" (host:port is where it
// listens), which a later member at that port does not serve.
func (m *Member) DataAddress() string { return m.m.DataAddress() }

// PingData makes one bare control round trip on the data plane to the
// member whose data address is addr: what a Locate there costs before
// the directory does anything. ctx must have a deadline.
func (m *Member) PingData(ctx context.Context, addr string) error { return m.m.PingData(ctx, addr) }

// Node is this member's store node as directory records name it.
func (m *Member) Node() *messages.NodeRef { return m.m.Node() }

// System is the member's actor system: application actors are spawned in
// it and subscribe to its EventStream (events.NodeFailed and the rest).
func (m *Member) System() *actor.ActorSystem { return m.m.System() }

// StoreNode is this member's store node: application actors send it Put,
// Get, Delete and Reduce, as on the embedded cluster.
func (m *Member) StoreNode() *actor.PID { return m.m.StoreNode() }

// Members are the store nodes of the members shards are placed on (this
// one included), sorted by member id.
func (m *Member) Members() []*messages.NodeRef { return m.m.Members() }

// WaitMembers waits until n members (this one included) are live here,
// then until its data-plane connections to them are warm (at most a few
// seconds more; see warmup.go).
func (m *Member) WaitMembers(ctx context.Context, n int) error { return m.m.WaitMembers(ctx, n) }

// ShardOwner is the member whose directory shard holds object id.
func (m *Member) ShardOwner(id string) string { return m.m.ShardOwner(id) }

// ViewOf asks the member whose actor system is at address for its live
// members (sorted ids), through the handshake.
func (m *Member) ViewOf(ctx context.Context, address string) ([]string, error) {
	return m.m.ViewOf(ctx, address)
}

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (m *Member) ParticipantProps(cfg participant.Config) *actor.Props {
	return m.m.ParticipantProps(cfg)
}

// LiveView is the member's live view (what its manage port serves at
// /live/): mount it elsewhere with http.StripPrefix.
func (m *Member) LiveView() http.Handler { return m.m.LiveView() }

// Done is closed when the member has stopped: by Stop or Leave, or by
// itself (the others declared it failed; Err says so).
func (m *Member) Done() <-chan struct{} { return m.m.Done() }

// Err is why the member stopped by itself, or nil.
func (m *Member) Err() error { return m.m.Err() }

// Stop leaves the cluster and stops the member: Leave, bounded by
// DefaultTimeout, for a program that has no use for the lost objects'
// ids (they are logged). For the other members it is a leave, not a
// failure: they move its shards and spread no failure notice.
func (m *Member) Stop() { m.m.Stop() }

// Leave leaves the cluster gracefully: the directory shards move off this
// member while its store still serves their rebuild, objects whose only
// copy is here are reported lost (deleted from the directory and logged,
// so Gets of them fail at once instead of waiting), then the member stops.
// A member that is the last of its cluster hands nothing off: everything
// it holds is lost. It returns the ids of the lost objects. A ctx
// without a deadline gets DefaultTimeout. A second Leave (or Stop) waits
// for the first, within ctx, and returns no ids.
func (m *Member) Leave(ctx context.Context) ([]string, error) { return m.m.Leave(ctx) }

// Spawn starts an application actor in this member's own actor system.
// That is where an application actor is fast: a Put, Get or Reduce it
// sends to StoreNode is a pointer hand-off, and the bytes of a Get's
// reply are the store's own (read-only with Get.read_only) or one copy;
// an actor in another actor system, even in the same process, sends
// every message, bytes and all, through Proto.Actor remote (gRPC). Its
// EventStream carries this member's recovery events. The actor stops
// with the member.
func (m *Member) Spawn(props *actor.Props) *actor.PID { return m.m.Spawn(props) }

// SpawnNamed is Spawn with a name, unique in the member's actor system.
func (m *Member) SpawnNamed(props *actor.Props, name string) (*actor.PID, error) {
	return m.m.SpawnNamed(props, name)
}

// PayloadRate is what TCP over Ethernet (1500-byte frames, timestamps)
// carries of a link of bitsPerSecond, in bytes per second: 1448 payload
// bytes in every 1538 on the wire (preamble and gap, Ethernet, IP and TCP
// headers). A 400 Mbit/s host shaped by tc (which counts 1514 bytes a
// frame) carries 47.8 MB/s, PayloadRate 47.1: just under, which is where
// a paced sliced AllReduce runs fastest (see internal/transport's
// EgressPacer).
func PayloadRate(bitsPerSecond float64) float64 { return member.PayloadRate(bitsPerSecond) }

// HelloPID is where the member whose actor system is at address takes
// first contact: a messages.MemberHello, and nothing else. Its reply's
// Store names the incarnation that answered, and its actors.
func HelloPID(address string) *actor.PID { return member.HelloPID(address) }

// Hello greets the member whose actor system is at address, without
// joining (first contact: a tool, a test, a client): its reply names the
// member, its store node (so its incarnation's actors) and its view.
// UNAVAILABLE if it does not answer within ctx (10 s if ctx has no
// deadline), or answers something else.
func Hello(ctx context.Context, root *actor.RootContext, address string) (*messages.MemberHelloReply, error) {
	return member.Hello(ctx, root, address)
}

// ProcessStore is the store node of the `hoplite node` process whose
// member id is id ("<bind>#<nonce>", as its start line prints it) and
// whose actor system is at address: a process names its incarnation's
// actors by its id's nonce. Nil for an id of another form (an embedded
// member's). A tool that knows a member only by its address asks Hello.
func ProcessStore(id, address string) *actor.PID { return member.ProcessStore(id, address) }

// EventRelayPID is the event relay of the member whose actor system is
// at address: a messages.SubscribeEvents sent there (with a sender, the
// subscriber) subscribes to the member's events.
func EventRelayPID(address string) *actor.PID { return member.EventRelayPID(address) }

// TLSConfig loads a member's (or a client's) mutual TLS configuration:
// its certificate and key, and the cluster's CA, which verifies both the
// servers it dials and the clients that dial it (RequireAndVerifyClientCert).
// Pass it to RemoteConfig for a client actor system that talks to a
// cluster started with --tls-cert, --tls-key and --tls-ca.
func TLSConfig(certFile, keyFile, caFile string) (*tls.Config, error) {
	return member.TLSConfig(certFile, keyFile, caFile)
}

// GenerateCerts writes a test cluster's CA (ca.pem, ca-key.pem) and a
// member certificate (member.pem, member-key.pem) for hosts into dir:
// what `hoplite certs` does. It returns the paths of the CA, the member
// certificate and its key.
func GenerateCerts(dir string, hosts []string) (ca, cert, key string, err error) {
	return member.GenerateCerts(dir, hosts)
}

// IssueCert signs another member certificate (name.pem, name-key.pem,
// for hosts) with the CA GenerateCerts wrote into dir (its ca.pem and
// ca-key.pem): what `hoplite certs --name` does. Members with certificates
// of their own are told apart by the limits that count connections per
// source and certificate. It returns the certificate's and the key's
// paths.
func IssueCert(dir, name string, hosts []string) (cert, key string, err error) {
	return member.IssueCert(dir, name, hosts)
}

// RemoteConfig is the Proto.Actor remote configuration of an actor system
// that talks to a cluster's members: theirs, and a client's (a tool, a
// barrier client, a bench driver). With tlsCfg (TLSConfig) remote runs
// over mutual TLS: the server requires a client certificate the CA signed
// and logs every refused handshake at warn on log (nil: discarded); dials
// present this side's certificate. tlsCfg nil is plaintext.
func RemoteConfig(host string, port int, tlsCfg *tls.Config, log logrus.FieldLogger) *remote.Config {
	return member.RemoteConfig(host, port, tlsCfg, log)
}
