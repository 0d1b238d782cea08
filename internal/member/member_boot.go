package member

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/logbridge"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster/identitylookup/disthash"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/labstack/echo"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/actors/coordactor"
	"github.com/hoplite-go/hoplite/internal/actors/revokeactor"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/experiments/naive"
	"github.com/hoplite-go/hoplite/internal/lag"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

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
	var b [4]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	id := cfg.Bind + "#" + nonce
	if cfg.embedded != nil {
		id = cfg.embedded.id
	}
	m := &Member{cfg: cfg, id: id, root: rootName(nonce), failures: &shardactor.FailureLog{},
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

func (m *Member) start(ctx context.Context, host string, port int) error {
	cfg := m.cfg
	// Proto.Actor panics on a port in use: check first, for a clear error.
	if port != 0 {
		if err := portFree("tcp", cfg.Bind); err != nil {
			return fmt.Errorf("member address %s is not available: %w", cfg.Bind, err)
		}
	}
	m.lag, m.releaseLag = lag.Shared()
	provider, err := m.newProvider(ctx, host)
	if err != nil {
		return err
	}
	m.provider = provider

	m.system = NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return logbridge.MemberLoggerTo(cfg.protoLog, m.id)
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
	m.warm = newWarmer(m, cfg.exp.NoWarmUp)
	m.store = objstore.NewStore(cfg.Capacity)
	// Before the metrics, which read its counters; its calls go on the
	// data plane set below, before any Locate can come.
	m.deputyGroup = deputyGroupOf(m.id)
	m.deputy = newLocateDeputy(
		func(ctx context.Context, addr string, ls []*messages.Locate) ([]*messages.LocateReply, []bool, error) {
			return shardactor.CallLocateBatch(ctx, m.deputyData, addr, ls)
		},
		func(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error) {
			return shardactor.CallLocate(ctx, m.deputyData, addr, l)
		})
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
		}, Limited: func(peer string, err error) {
			// Already rate-limited per source by the transport.
			m.log.WithFields(logrus.Fields{"peer": peer, "port": "data"}).WithError(err).Warn("data plane refused a connection or request at its limits")
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
	// The start's internal requests (the gossip actor's state, asked while
	// the member starts) wait 5 s upstream: past that on a machine at load
	// 20 an embedded member's start panicked "future: timeout".
	pcfg.TimeoutTime = m.lag.Stretch(pcfg.TimeoutTime)
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
	m.ref = &messages.NodeRef{NodeId: m.id, Address: addr, ActorId: m.root + "/" + storeName, DataAddress: dataAddr}
	selfStores := []*messages.NodeRef{m.ref}
	m.stores.Store(&selfStores)
	m.peers.Store(newPeerIndex())
	table := make([]*actor.PID, cfg.Shards)
	for j := range table {
		table[j] = ShardPID(addr, m.root, j)
	}
	m.table.Store(&table)
	m.coord = coordactor.ActorConfig{Self: m.ref, ShardFor: m.shardFor, PushAt: m.pushAt, SubscribeAt: m.subscribeAt, CallData: m.callData, Estimator: m.estimator, Log: m.log,
		BeforeReceive: cfg.hooks.Coordinator, Stretch: m.lag.Stretch, WatchViaShard: true,
		Reduce: reduction.Config{InlineLimit: cfg.InlineLimit, Shape: cfg.exp.ReduceShape, ForceDegree: cfg.exp.ReduceDegree,
			AllReduceShape: cfg.exp.AllReduceShape, Paced: m.pace() > 0, MinSlice: bufalloc.HugeMin, UnbatchedTasks: cfg.exp.UnbatchedReduceTasks,
			Shaper:       plan.Shaper{Rate: m.uplink(), Burst: m.burst()},
			NoRingGather: cfg.exp.NoRingGather, NoInlinePush: cfg.exp.NoInlinePush}}

	watched := &watchedTransport{Transport: m.data, report: m.suspectData, metrics: m.metrics, peerOf: m.peerByData, down: m.crashed.Load}
	m.deputyData = watched
	storeProps := storeactor.NewProps(storeactor.Config{
		Self: m.ref, Store: m.store, ShardFor: m.shardFor, Locate: m.locator(watched), Create: m.creator(watched), Delete: m.deleter(watched), Transport: watched,
		ChunkSize: cfg.ChunkSize, InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout,
		StallTimeout: cfg.StallTimeout, Stretch: m.lag.Stretch, Hooks: cfg.hooks.Store, Log: m.log, Estimator: m.estimator,
		MaxRemoteReply: maxRemoteReply,
	})
	if cfg.exp.Naive {
		// The naive baseline takes the node's Reduces before the node sees
		// them; its Gets are its shards' (shardProps).
		storeProps.Configure(actor.WithReceiverMiddleware(naive.Middleware(naive.Config{DefaultTimeout: cfg.DefaultTimeout})))
	}
	children := []child{
		{name: storeName, props: storeProps},
		{name: revokeName, props: revokeactor.NewActorProps(revokeactor.ActorConfig{Self: m.id, Peer: m.revokePeer,
			Deliver: m.deliver, Admit: m.admitNotice, Log: m.log})},
		{name: membersName, props: newMembersProps(m)},
		{name: barriersName, props: barrieractor.NewHostProps(barrieractor.HostConfig{Log: m.log, BeforeReceive: cfg.hooks.Barrier})},
	}
	node, err := m.system.Root.SpawnNamed(nodeSupervisorProps(children), m.root)
	if err != nil {
		return fmt.Errorf("start the node supervisor: %w", err)
	}
	m.node.Store(node)
	if _, err := m.system.Root.RequestFuture(node, ready{}, m.lag.Stretch(10*time.Second)).Result(); err != nil {
		return fmt.Errorf("the node supervisor did not start: %w", err)
	}
	m.storePID.Store(memberPID(addr, m.root, storeName))
	m.revokePID.Store(memberPID(addr, m.root, revokeName))
	members := memberPID(addr, m.root, membersName)
	m.membersPID.Store(members)
	if _, err := m.system.Root.SpawnNamed(helloProps(members), helloName); err != nil {
		return fmt.Errorf("start the hello actor: %w", err)
	}
	if _, err := m.system.Root.SpawnNamed(eventRelayProps(m.id), eventRelayName); err != nil {
		return fmt.Errorf("start the event relay: %w", err)
	}
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
			cfg.version, cfg.Shards, strings.Join(s.reasons, "; "))
	}
	fields := logrus.Fields{"address": addr, "data": dataAddr, "manage_port": cfg.ManagePort,
		"members": len(m.Members()), "shards": cfg.Shards}
	// A benchmark's logs say which system a member was.
	if e := cfg.exp.String(); e != "" {
		fields["experiments"] = e
	}
	if p := m.pace(); p > 0 {
		fields["pace_bytes_per_second"] = p
	}
	// Ready means warm: connections to the peers known now, and the
	// stated link's chunk size (warmup.go).
	m.warm.start(ctx, m.quit)
	m.log.WithFields(fields).Info("member joined the cluster")
	return nil
}

// NewActorSystem is an actor system whose generated actor names ("$…":
// request futures and catchers, reduce workers, relays) count from a
// random point rather than from 1, so that two incarnations at one
// address never generate the same ones. The member's own actors are
// named by its incarnation (rootName); these are the others: a late reply
// to a request of a member that stopped then finds no actor at the
// process that took its address, rather than that process's own request
// waiting for another answer.
func NewActorSystem(opts ...actor.ConfigOption) *actor.ActorSystem {
	sys := actor.NewActorSystem(opts...)
	var b [8]byte
	_, _ = rand.Read(b[:])
	// Below 2^62: the counter never wraps.
	atomic.StoreUint64(&sys.ProcessRegistry.SequenceID, binary.BigEndian.Uint64(b[:])>>2)
	return sys
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
			Refresh: cfg.RefreshInterval, Timeout: cfg.HealthTimeout, Misses: cfg.HealthMisses, TLS: cfg.tls, Stretch: m.lag.Stretch,
			Log: m.log.WithField("provider", ProviderAutomanaged), Metrics: m.manage, NoPull: cfg.noSeedExchange})
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
	p, err := newEtcdProvider(ctx, cfg, m.log)
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
	// Bounded per source and in all, a silent connection briefly
	// (manage_guard.go): one address cannot starve the health checks.
	m.manage = newManageMetrics()
	var wrapTLS func(net.Listener) net.Listener
	if cfg.tls != nil {
		wrapTLS = func(ln net.Listener) net.Listener {
			return &tlsManageListener{Listener: ln, cfg: cfg.tls, log: m.log, port: cfg.ManagePort}
		}
	}
	limits := defaultManageLimits
	limits.MembersAt = m.membersAt
	e := newManageEcho(ln, newManageGuard(limits, m.manage, m.log.WithField("port", "manage")), wrapTLS, m.log)
	m.manageRoutes(e)
	m.health = e
	return e, nil
}

// shardProps are the props of shard j here: rebuilt after its former
// host failed, or moved here from a live one (see shardactor.ShardConfig).
// Its table chooses each Locate's fan-out by the cost model
// (directory.FanOutAuto) for a broadcast to the members live when it was
// placed, or to the receivers an object has if more ask.
func (m *Member) shardProps(j int, rebuilt, moved bool) *actor.Props {
	receivers := 0
	if live := m.live.Load(); live != nil {
		receivers = len(*live) - 1
	}
	table := directory.TableConfig{InlineLimit: m.cfg.InlineLimit, InlineUplink: m.uplink(),
		FanOut: directory.FanOutAuto, Receivers: receivers, Burst: m.burst()}
	if m.cfg.exp.Naive {
		// The naive baseline chooses the creator for every receiver this
		// member's shards answer (a naive cluster is naive on every member).
		table.Senders = naive.FromCreator
	}
	return shardactor.NewShardProps(shardactor.ShardConfig{
		Table: table, Log: m.log,
		NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID, shardStopped func() bool) *actor.Props {
			return coordactor.NewProps(m.coord, id, start, requester, shardStopped)
		},
		Index: j, Count: m.cfg.Shards, Nodes: m.storeNodes, Failures: m.failures, Rebuilt: rebuilt, Moved: moved, LossGrace: m.lossGrace,
		BeforeReceive: m.cfg.hooks.Shard, Host: m.id, Keeper: m.ref,
	})
}
