package member

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"
	"github.com/labstack/echo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/coordactor"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/lag"
	"github.com/hoplite-go/hoplite/internal/liveview"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// Actor names. A member's actors live under its node supervisor, whose
// name carries the incarnation: "node#<nonce>", the nonce of the member
// id on a process ("127.0.0.1:7001#5f0c2a91" runs "node#5f0c2a91/store"),
// a random one on the embedded cluster. A message meant for one
// incarnation (a PID a peer kept, a NodeRef in a directory entry, a shard
// table's entry) that reaches the process holding its address after a
// restart finds no actor of that name there: it goes to the dead letters,
// and a request comes back UNAVAILABLE rather than being handled by a
// member it was not meant for. Only first contact, which does not know the
// incarnation yet, uses a name every member has: "hello", which takes
// nothing but the handshake (whose answer names the incarnation).
const (
	memberRoot   = "node"     // node#<nonce>: the node supervisor
	storeName    = "store"    // node#<nonce>/store: the store node
	revokeName   = "revoke"   // node#<nonce>/revoke: the failure broadcaster
	membersName  = "members"  // node#<nonce>/members: handshake, placement, shards
	barriersName = "barriers" // node#<nonce>/barriers: the barrier managers hosted here
	helloName    = "hello"    // hello: first contact, handed to the members actor
)

// rootName is the node supervisor's name of the incarnation with nonce.
func rootName(nonce string) string { return memberRoot + "#" + nonce }

// RootOf is the node supervisor's name of the incarnation whose store
// node is ref ("" if ref names none).
func RootOf(ref *messages.NodeRef) string {
	root, _, ok := strings.Cut(ref.GetActorId(), "/")
	if !ok {
		return ""
	}
	return root
}

// memberPID is actor name of the incarnation whose node supervisor is
// root, at address.
func memberPID(address, root, name string) *actor.PID {
	return actor.NewPID(address, root+"/"+name)
}

// HelloPID is where the member whose actor system is at address takes
// first contact: a messages.MemberHello, and nothing else. Its reply's
// Store names the incarnation that answered, and its actors.
func HelloPID(address string) *actor.PID { return actor.NewPID(address, helloName) }

// ProcessStore is the store node of the `hoplite node` process whose
// member id is id ("<bind>#<nonce>", as its start line prints it) and
// whose actor system is at address: a process names its incarnation's
// actors by its id's nonce. Nil for an id of another form (an embedded
// member's). A tool that knows a member only by its address asks Hello.
func ProcessStore(id, address string) *actor.PID {
	_, nonce, ok := strings.Cut(id, "#")
	// A process's nonce is 8 hex digits; an embedded member's
	// incarnation ("node-1#1") is a count, and names no actor.
	if b, err := hex.DecodeString(nonce); !ok || err != nil || len(b) != 4 {
		return nil
	}
	return memberPID(address, rootName(nonce), storeName)
}

// Hello greets the member whose actor system is at address, without
// joining (first contact: a tool, a test, a client): its reply names the
// member, its store node (so its incarnation's actors) and its view.
// UNAVAILABLE if it does not answer within ctx (10 s if ctx has no
// deadline), or answers something else.
func Hello(ctx context.Context, root *actor.RootContext, address string) (*messages.MemberHelloReply, error) {
	return HelloDigest(ctx, root, address, 0)
}

// HelloDigest is Hello carrying viewDigest, the memberview.Digest of the
// live members the caller last learned (0: none): a member whose view
// has that digest answers with view_same set and no view, so a client
// that asks again and again costs O(1) bytes, not O(n), while nothing
// changes.
func HelloDigest(ctx context.Context, root *actor.RootContext, address string, viewDigest uint64) (*messages.MemberHelloReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	res, err := actorutil.Request(ctx, root, HelloPID(address), &messages.MemberHello{ProtocolVersion: ProtocolVersion, ViewDigest: viewDigest})
	if actorutil.IsNotRunning(err) {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s is an actor system, but no Hoplite member of this version runs there (no %s actor): is it a hoplite node's address (--bind), of the same release?", address, helloName)
	}
	if err != nil {
		var e *messages.Error
		why := err.Error()
		if errors.As(err, &e) {
			why = e.GetMessage()
		}
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member at %s does not answer (is it a hoplite node's actor system address, --bind?): %s", address, why)
	}
	r, ok := res.(*messages.MemberHelloReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member at %s answered %s, not a handshake", address, actorutil.TypeName(res))
	}
	return r, nil
}

// Member is one member of a multi-process cluster: its node supervisor,
// store node, failure broadcaster, the directory shards placed on it and
// their reduce coordinators. Membership comes from Proto.Actor's cluster
// (a provider: automanaged by default); control messages travel on
// Proto.Actor remote, object bytes on a direct-TCP data plane. The Client
// and the messages are the embedded cluster's.
type Member struct {
	// deputy is this member's side as a Locate deputy, deputyGroup its
	// own Locates' group before the modulo (locate_deputy.go).
	deputy      *locateDeputy
	deputyGroup uint64
	deputyData  transport.Caller
	cfg         MemberConfig
	id          string
	// root is the node supervisor's name, new at every start (rootName).
	root      string
	log       *logrus.Entry
	system    *actor.ActorSystem
	pc        *pcluster.Cluster
	provider  pcluster.ClusterProvider
	data      transport.Transport // the data plane: direct TCP, or in memory when embedded
	closeData func()              // stops serving this member's objects
	store     *objstore.Store
	ref       *messages.NodeRef
	failures  *shardactor.FailureLog
	estimator *estimator.Estimator
	// warm keeps the member's data-plane connections to its peers and
	// its estimates ready for the first operations (warmup.go).
	warm *warmer
	// lag is the process's scheduling delay, which stretches the timeouts
	// inside the member (stall, health check, re-subscription); releaseLag
	// gives it back at teardown.
	lag        *lag.Meter
	releaseLag func()
	metrics    *memberMetrics
	coord      coordactor.ActorConfig

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

	health   *echo.Echo     // the automanaged provider's HTTP server
	manage   *manageMetrics // what the manage port turned away; nil without one (embedded)
	liveView *liveState     // the live view: this member's recorder, and the hub its manage port serves
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
	// silenced is set by crash once Proto.Actor remote and the data plane
	// are shut down: from then on nothing this member's actors send
	// reaches another member. Between crashed and silenced an actor's
	// message may still get out, as one sent just before a real crash
	// does; a test that holds an actor "until the kill took effect" waits
	// for silenced.
	silenced atomic.Bool
	// closing is set by quiesce: the whole cluster stops, and this member
	// takes no other member's departure for a failure or a leave.
	closing atomic.Bool
	// leaveOnce: one Leave (or Stop) leaves; a later one waits for it.
	leaveOnce sync.Once
}

// peerIndex resolves the members a failure may be reported about.
type peerIndex struct {
	byID    map[string]string            // member id -> actor system address
	byAddr  map[string]string            // actor system address -> member id
	byData  map[string]string            // data address -> member id
	dataOf  map[string]string            // actor system address -> data address
	storeOf map[string]*messages.NodeRef // member id -> its store node (whose actor id names its incarnation's root)
}

func (m *Member) storeNodes() []*messages.NodeRef { return *m.stores.Load() }

func (m *Member) hello() *messages.MemberHello {
	return &messages.MemberHello{ProtocolVersion: m.cfg.version, Shards: int32(m.cfg.Shards), MemberId: m.id, Store: m.ref,
		Cluster: m.cfg.ClusterName}
}

// compatible decides the handshake.
func (m *Member) compatible(version uint32, shards int32) (bool, string) {
	if version != m.cfg.version || int(shards) != m.cfg.Shards {
		return false, fmt.Sprintf("protocol version %d with %d shards, but %s speaks protocol version %d with %d shards",
			version, shards, m.id, m.cfg.version, m.cfg.Shards)
	}
	return true, ""
}

// ID is this member's id in the cluster: its bind address and a nonce
// (every start is a new incarnation). It is also its store's node id.
func (m *Member) ID() string { return m.id }

// Address is the actor system's address (host:port).
func (m *Member) Address() string { return m.system.Address() }

// DataAddress is this incarnation's data plane address, as its NodeRef
// carries it: on TCP "host:port#<incarnation>" (host:port is where it
// listens), which a later member at that port does not serve.
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

// DefaultTimeout bounds this member's calls that carry no deadline
// (MemberConfig.DefaultTimeout, defaulted): a client of its store node
// takes it for its own.
func (m *Member) DefaultTimeout() time.Duration { return m.cfg.DefaultTimeout }

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

// WaitMembers waits until n members (this one included) are live here,
// then until its data-plane connections to them are warm (at most a few
// seconds more; see warmup.go).
func (m *Member) WaitMembers(ctx context.Context, n int) error {
	for {
		if len(*m.live.Load()) >= n {
			m.warm.waitWarm(ctx)
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
	res, err := m.system.Root.RequestFuture(HelloPID(address),
		&messages.MemberHello{ProtocolVersion: m.cfg.version, Shards: int32(m.cfg.Shards)}, d).Result()
	if err != nil {
		return nil, err
	}
	r, ok := res.(*messages.MemberHelloReply)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", res)
	}
	return r.GetView(), nil
}

func newPeerIndex() *peerIndex {
	return &peerIndex{byID: map[string]string{}, byAddr: map[string]string{}, byData: map[string]string{}, dataOf: map[string]string{},
		storeOf: map[string]*messages.NodeRef{}}
}

// peerPID is actor name of member id's incarnation as this member knows
// it (self included), or nil if it knows no store node of id.
func (m *Member) peerPID(id, name string) *actor.PID {
	if id == m.id {
		return memberPID(m.system.Address(), m.root, name)
	}
	ref := (*m.peers.Load()).storeOf[id]
	if ref == nil || RootOf(ref) == "" {
		return nil
	}
	return memberPID(ref.GetAddress(), RootOf(ref), name)
}

// shardName is the actor name of shard j under a member's node
// supervisor ("node#<nonce>/shard-j").
func shardName(j int) string { return fmt.Sprintf("shard-%d", j) }

// ShardPID is where shard j lives when the incarnation whose node
// supervisor is root, at address, hosts it.
func ShardPID(address, root string, j int) *actor.PID {
	return memberPID(address, root, shardName(j))
}

// NameMembers tells this process which member id each store's
// incarnation root belongs to (ids[i] is stores[i]'s), so that errors
// about their actors name them by member id (package membername).
func NameMembers(ids []string, stores []*messages.NodeRef) {
	for i, id := range ids {
		if i < len(stores) && stores[i] != nil {
			membername.Register(stores[i].GetAddress(), RootOf(stores[i]), id)
		}
	}
}

// topologyUpdate is a topology the provider published, numbered in the
// order it published them (seq counts from 1).
type topologyUpdate struct {
	topology *pcluster.ClusterTopology
	seq      uint64
}

// suspicion is an address of a peer that failed a call: detect probes it.
type suspicion struct {
	address     string // actor system address, or
	dataAddress string // data plane address
	why         string
	at          time.Time
}

// liveState is a member's part of the live view (package liveview): the
// recorder of its own events, and the hub that gathers every member's
// for the browsers attached to its manage port.
type liveState struct {
	rec  *liveview.Recorder
	hub  *liveview.Hub
	data atomic.Pointer[string] // the data plane's address, once bound
}

// uplink is the payload rate of this member's uplink in bytes per second
// as it is told (its LinkRate, or the embedded cluster's emulated links),
// 0 if it is not: the rate its directory shards reckon their inline
// answers leave at (directory.TableConfig.InlineUplink).
func (m *Member) uplink() float64 {
	if e := m.cfg.embedded; e != nil {
		return e.link
	}
	return PayloadRate(m.cfg.LinkRate)
}

// burst is the payload bytes this member's link passes at once after
// it idled (its LinkBurst as PayloadRate counts a rate's), 0 if not
// stated or in an embedded cluster.
func (m *Member) burst() float64 {
	if m.cfg.embedded != nil || m.cfg.LinkBurst <= 0 {
		return 0
	}
	return PayloadRate(float64(m.cfg.LinkBurst) * 8) // bytes as bits a second: the same share
}

// pace is the rate of this member's paced streams (0: unpaced): its
// link's payload rate, on the TCP data plane only.
func (m *Member) pace() float64 {
	if m.cfg.embedded != nil {
		return 0
	}
	return PayloadRate(m.cfg.LinkRate)
}

// memberMetrics are one member's Prometheus metrics, in a registry of its
// own (an embedded cluster runs several members in one process). The
// member's manage port serves them at /metrics.
type memberMetrics struct {
	reg          *prometheus.Registry
	received     *prometheus.CounterVec // by peer member
	sent         prometheus.Counter
	fetches      prometheus.Counter
	fetchSeconds prometheus.Histogram
	failovers    prometheus.Counter
	repairs      prometheus.Counter
	replans      prometheus.Counter
	failures     prometheus.Counter
	reduces      *prometheus.HistogramVec // by result
	locates      *prometheus.CounterVec   // Locates served on the data plane, by result
	pushes       *prometheus.CounterVec   // inline AllReduce results pushed to this member on the data plane, by result
	subscribes   *prometheus.CounterVec   // Reduce coordinators' SubscribeBatches served on the data plane, by result

	// locatesOK is locates' "ok" child, looked up once: every small Get
	// counts in it.
	locatesOK prometheus.Counter
}

// warmer keeps a member warm (warmup.go).
type warmer struct {
	m       *Member
	disable bool
	kick    chan struct{} // capacity 1: the peers changed

	mu sync.Mutex
	// warm holds the data addresses whose last round trip succeeded, and
	// when: only current targets (at most maxWarmPeers).
	warm map[string]time.Time
}
