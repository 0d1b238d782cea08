package member

import (
	"crypto/tls"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ProtocolVersion is the version of the member protocol (the messages of
// the messages package and the placement rule). Members of different
// versions do not work together: the handshake keeps them apart.
// Version 2: Tombstones (a rebuilt shard learns the deleted ids) and the
// root generation on a Reduce's CreateObject. Version 3: barrier replicas
// are named by member id (every member hosts barriers). Version 4: a
// member's actors are named by its incarnation ("node#<nonce>/...", first
// contact at "hello"), and the data plane's requests name the incarnation
// of the endpoint they are meant for (data protocol version 3). Version
// 5: the Proto.Actor copy's wire names are Hoplite's own
// (hoplite.protoactor.*, so a version 4 member cannot even connect),
// barriers combine up a tree of members, and members pull each other's
// rosters. Version 6: an object's fingerprint is XXH3 (package
// fingerprint), so a version 5 member would take every Put of an id it
// also holds for a CONFLICT. Version 7: a Put's withdrawn registration
// names its request (UnpublishLocation.request_id), and a version 6
// shard, which ignores it, would let a stale withdrawal remove the
// retried Put's copy. Version 8: a republished creator copy names its
// registration (PublishLocation.registration), and a directory shard
// tells its member's store node the ids it marked lost and its amnesia,
// which the store node republishes (Tombstones.lost_ids, amnesic, shard):
// a version 7 store node would take a shard's note for nothing and a
// version 7 shard would drop what the notes carry. Version 9: a caller's
// cancel reaches its Reduce's coordinator (CancelReduce), which a
// version 8 member drops as an unknown message, so its Reduces would go
// on to commit after their callers' cancels. Version 10: a Locate
// carries no naive switch (field 5 is reserved): a naive member's shards
// send every receiver to the creator by their own policy, so a version 9
// shard would offer a version 10 naive member's Gets any copy.
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

// manageConns bounds the manage port's open connections (health checks
// of the other members, scrapes, profiles).
const manageConns = 512

// maxRemoteMessage bounds a message on protoactor remote (gRPC's default
// is 4 MiB; an application may Put or Get an object through a remote
// store node). Bulk bytes between store nodes use the data plane.
const maxRemoteMessage = 256 << 20

// maxRemoteReply is the largest object a Get answers to another actor
// system: its reply is one remote message, which the endpoint writer may
// batch with others, so it keeps 4 MiB of the cap for them.
const maxRemoteReply = maxRemoteMessage - 4<<20

// maxQueuedFromRemote bounds an actor's mailbox for messages from other
// processes, and the messages queued for one peer: far above what a store node or shard queues under load (a
// 1,024-member broadcast's Gets arrive at once), well below what fills a
// member's memory with small requests.
const maxQueuedFromRemote = 1 << 16

// MemberConfig configures one member of a multi-process cluster. Its
// exported fields are cluster.MemberConfig's, which documents them for
// the users who set them (the facade copies them over, and its test
// checks that each one arrives); zero fields take the defaults that
// withDefaults fills in. The unexported ones are this module's own.
type MemberConfig struct {
	Bind, DataBind               string
	ManagePort                   int
	Seeds                        []string
	Provider, ProviderAddress    string
	ClusterName                  string
	Shards                       int
	Capacity                     int64
	ChunkSize                    int
	InlineLimit                  int64
	DefaultTimeout, StallTimeout time.Duration
	WarmMemory                   int64
	LinkRate                     float64
	LinkBurst                    int64
	RefreshInterval              time.Duration
	HealthTimeout                time.Duration
	HealthMisses                 int
	Pprof                        bool
	JoinTimeout                  time.Duration
	TLSCert, TLSKey, TLSCA       string
	EtcdCert, EtcdKey, EtcdCA    string
	Log                          *logrus.Logger
	Logger                       *slog.Logger
	// LocateDeputies is how many groups of Locate deputies the members
	// form (locate_deputy.go; directory.LocateDeputies): 0,
	// directory.DefaultLocateDeputies from directory.DeputyMinMembers
	// members on and none below; < 0, none.
	LocateDeputies int

	// exp are the experiments (internal/experiments) a benchmark or a
	// test turned on for this member.
	exp experiments.Set
	// hooks are the fault-injection points (internal/testhooks) a test
	// set for this member.
	hooks testhooks.Set
	// version is the member protocol version this member speaks:
	// ProtocolVersion, unless a test of the handshake claims another
	// (testhooks.Set.ProtocolVersion); set by withDefaults.
	version uint32

	// noSeedExchange turns the automanaged seed exchange off (tests of
	// what members configured with different seeds see without it).
	noSeedExchange bool

	// tls is loaded from TLSCert, TLSKey and TLSCA by withDefaults.
	tls *tls.Config
	// etcdTLS is loaded from EtcdCert, EtcdKey and EtcdCA by withDefaults
	// (nil: plaintext).
	etcdTLS *tls.Config
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
	id         string // the member id: node-i, node-i#k after k restarts
	membership *membership
	memory     *transport.Memory
	estimator  *estimator.Estimator // one process, one network: shared
	// link is the emulated links' bandwidth in bytes per second (0:
	// memory speed; Config.LinkBandwidth).
	link float64
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
	if c.exp.ReduceDegree < 0 {
		return bad("reduce degree %d: must be >= 1 to force the degree, or 0 for the cost model's", c.exp.ReduceDegree)
	}
	switch c.exp.ReduceShape {
	case "", reduction.ShapeDAry, reduction.ShapeChainLeaf:
	default:
		return bad("unknown reduce shape %q (%s or %s)", c.exp.ReduceShape, reduction.ShapeDAry, reduction.ShapeChainLeaf)
	}
	switch c.exp.AllReduceShape {
	case "", reduction.ShapeDAry, reduction.ShapeSliced:
	default:
		return bad("unknown allreduce shape %q (%s or %s)", c.exp.AllReduceShape, reduction.ShapeDAry, reduction.ShapeSliced)
	}
	if c.LinkRate < 0 || math.IsNaN(c.LinkRate) || math.IsInf(c.LinkRate, 0) {
		return bad("link rate %v bit/s: want a positive rate, or 0 for unknown", c.LinkRate)
	}
	if c.LinkBurst < 0 || (c.LinkBurst > 0 && c.LinkRate == 0) {
		return bad("link burst %d bytes: want 0 for none, or a positive size with a link rate", c.LinkBurst)
	}
	if c.InlineLimit == 0 {
		c.InlineLimit = 64 << 10
	}
	if c.WarmMemory == 0 {
		c.WarmMemory = DefaultWarmMemory
	}
	if c.WarmMemory > maxWarmMemory {
		return bad("warm memory %d bytes: at most %d", c.WarmMemory, int64(maxWarmMemory))
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
	if c.EtcdCert != "" || c.EtcdKey != "" || c.EtcdCA != "" {
		if c.Provider != ProviderEtcd {
			return bad("etcd TLS (--etcd-cert, --etcd-key, --etcd-ca) is for the etcd provider, not %q", c.Provider)
		}
		cfg, err := certs.ClientConfig(c.EtcdCert, c.EtcdKey, c.EtcdCA)
		if err != nil {
			return bad("etcd TLS (--etcd-cert, --etcd-key, --etcd-ca): %v", err)
		}
		c.etcdTLS = cfg
	}
	c.version = ProtocolVersion
	if v := c.hooks.ProtocolVersion; v != 0 {
		c.version = v
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

// PayloadRate is what TCP over Ethernet (1500-byte frames, timestamps)
// carries of a link of bitsPerSecond, in bytes per second: 1448 payload
// bytes in every 1538 on the wire (preamble and gap, Ethernet, IP and TCP
// headers). A 400 Mbit/s testbed host (shaped by tc, which counts 1514
// bytes a frame) carries 47.8 MB/s, PayloadRate 47.1: just under, which is
// where a paced sliced AllReduce runs fastest (see internal/transport's
// EgressPacer).
func PayloadRate(bitsPerSecond float64) float64 {
	if !(bitsPerSecond > 0) || math.IsInf(bitsPerSecond, 0) {
		return 0
	}
	return bitsPerSecond / 8 * 1448 / 1538
}
