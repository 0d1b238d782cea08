package cluster

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	barrierhost "github.com/hoplite-go/hoplite/actors/barrier"
	"github.com/hoplite-go/hoplite/actors/directory"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/coordinator/plan"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// Config configures an embedded cluster. Zero fields take the defaults.
type Config struct {
	// Nodes is the number of logical nodes (at least 1).
	Nodes int
	// Shards is the number of directory shards (default Nodes), spread
	// round-robin over the nodes.
	Shards int
	// Capacity is each node's store size in bytes (default 1 GiB).
	Capacity int64
	// ChunkSize is the copy and streaming unit; 0 adapts it to the
	// measured bandwidth (storenode.Config.ChunkSize).
	ChunkSize int
	// InlineLimit: smaller objects live in the directory (default 64 KiB).
	InlineLimit int64
	// LinkBandwidth emulates each node's uplink and downlink in bytes per
	// second on the in-memory data plane; 0 is unlimited (memory speed).
	LinkBandwidth float64
	// Naive makes every Get fetch from the creator: the baseline without
	// collectives, for comparisons.
	Naive bool
	// DefaultTimeout bounds calls that carry no deadline (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer without progress (default 10s).
	StallTimeout time.Duration
	// ReduceShape is coordinator.ShapeDAry (default: degree by the cost
	// model) or coordinator.ShapeChainLeaf.
	ReduceShape string
	// ReduceDegree, if > 0, forces the reduce tree degree (experiments).
	ReduceDegree int
	// Hooks are test and fault-injection points in every node.
	Hooks storenode.Hooks
	// ShardHook runs before each message a directory shard receives (a
	// hook that panics crashes that shard).
	ShardHook func(shard string, msg any)
	// CoordinatorHook runs before each message a Reduce's coordinator
	// receives, with the Reduce's id (target#nonce). A hook that panics
	// crashes that coordinator: the Reduce fails with UNAVAILABLE.
	CoordinatorHook func(reduce string, msg any)
	// Log receives the cluster's logs and Proto.Actor's (default: logrus's
	// standard logger).
	Log *logrus.Logger
}

// Local is an embedded cluster: N logical nodes in one process.
type Local struct {
	cfg        Config
	system     *actor.ActorSystem
	transport  *transport.Memory
	log        *logrus.Entry
	estimator  *plan.Estimator
	failures   *directory.FailureLog
	shardTable atomic.Pointer[[]*actor.PID] // copy on write: shards move when their host fails
	// live is a snapshot of the live nodes' refs, read by starting shards
	// without l.mu: Kill and Stop hold l.mu while they wait for nodes (and
	// their shards) to stop.
	live        atomic.Pointer[[]*messages.NodeRef]
	coordinator coordinator.ActorConfig

	mu          sync.Mutex // guards what Kill and Restart change
	supervisors []*actor.PID
	storeNodes  []*actor.PID
	stores      []*storenode.Store
	refs        []*messages.NodeRef
	alive       []bool
	starts      []int // how often each node was started (names restarts)
	shardHost   []int
	stopped     bool
}

// StartLocal starts an embedded cluster and returns once every node
// accepts requests.
func StartLocal(cfg Config) (*Local, error) {
	if cfg.Nodes < 1 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a cluster needs at least one node, got %d", cfg.Nodes)
	}
	if cfg.Shards <= 0 {
		cfg.Shards = cfg.Nodes
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = 1 << 30
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	if cfg.InlineLimit == 0 {
		cfg.InlineLimit = 64 << 10
	}
	system := actor.NewActorSystem(actorSystemOptions(cfg.Log)...)
	l := &Local{cfg: cfg, system: system, transport: transport.NewMemory(cfg.LinkBandwidth),
		log: logrus.NewEntry(cfg.Log), failures: &directory.FailureLog{}}
	addr := system.Address()
	shards := make([]*actor.PID, cfg.Shards)
	for j := range shards {
		l.shardHost = append(l.shardHost, j%cfg.Nodes)
		shards[j] = actor.NewPID(addr, fmt.Sprintf("%s/shard-%d", nodeName(j%cfg.Nodes), j))
	}
	l.shardTable.Store(&shards)
	// One process, one network: every node shares the measurements.
	// Until transfers are measured, B is the emulated link if there is one.
	bandwidth := 1.25e9
	if cfg.LinkBandwidth > 0 {
		bandwidth = cfg.LinkBandwidth
	}
	l.estimator = plan.NewEstimator(100*time.Microsecond, bandwidth)
	l.coordinator = coordinator.ActorConfig{ShardFor: l.shardFor, Estimator: l.estimator, Log: l.log,
		BeforeReceive: cfg.CoordinatorHook,
		Reduce:        coordinator.Config{InlineLimit: cfg.InlineLimit, Shape: cfg.ReduceShape, ForceDegree: cfg.ReduceDegree}}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < cfg.Nodes; i++ {
		l.supervisors = append(l.supervisors, nil)
		l.storeNodes = append(l.storeNodes, nil)
		l.starts = append(l.starts, 0)
		l.stores = append(l.stores, nil)
		l.refs = append(l.refs, nil)
		l.alive = append(l.alive, false)
		var hosted []int
		for j := i; j < cfg.Shards; j += cfg.Nodes {
			hosted = append(hosted, j)
		}
		if err := l.startNode(i, hosted); err != nil {
			l.stopLocked()
			return nil, err
		}
	}
	cfg.Log.WithFields(logrus.Fields{"nodes": cfg.Nodes, "shards": cfg.Shards}).Info("embedded cluster started")
	return l, nil
}

func (l *Local) shardFor(id string) *actor.PID {
	t := *l.shardTable.Load()
	return t[directory.ShardIndex(id, len(t))]
}

// liveNodes lists the store nodes that are up (asked to republish when a
// shard starts).
func (l *Local) liveNodes() []*messages.NodeRef {
	if p := l.live.Load(); p != nil {
		return *p
	}
	return nil
}

// publishLive refreshes the snapshot liveNodes reads. Callers hold l.mu.
func (l *Local) publishLive() {
	var out []*messages.NodeRef
	for i, ref := range l.refs {
		if l.alive[i] {
			out = append(out, ref)
		}
	}
	l.live.Store(&out)
}

func (l *Local) shardProps(j int, rebuilt bool) *actor.Props {
	return directory.NewShardProps(directory.ShardConfig{
		Table: directory.TableConfig{InlineLimit: l.cfg.InlineLimit}, Log: l.log,
		NewCoordinator: func(id string, start *messages.StartReduce, requester *actor.PID) *actor.Props {
			return coordinator.NewProps(l.coordinator, id, start, requester)
		},
		Index: j, Count: l.cfg.Shards, Nodes: l.liveNodes, Failures: l.failures,
		BeforeReceive: l.cfg.ShardHook, Rebuilt: rebuilt,
	})
}

// startNode starts node i empty, with the shards it hosts. Callers hold
// l.mu.
func (l *Local) startNode(i int, shards []int) error {
	name := nodeName(i)
	store := storenode.NewStore(l.cfg.Capacity)
	dataAddr, err := l.transport.Serve(name, store)
	if err != nil {
		return err
	}
	addr := l.system.Address()
	// A restarted node's actors live under a new supervisor name: the
	// old supervisor may still be stopping (see Kill), holding its name.
	supName := name
	if l.starts[i] > 0 {
		supName = fmt.Sprintf("%s.%d", name, l.starts[i])
	}
	l.starts[i]++
	ref := &messages.NodeRef{NodeId: name, Address: addr, ActorId: supName + "/store", DataAddress: dataAddr}
	children := []child{{name: "store", props: storenode.NewProps(storenode.Config{
		Self: ref, Store: store, ShardFor: l.shardFor, Transport: l.transport,
		ChunkSize: l.cfg.ChunkSize, InlineLimit: l.cfg.InlineLimit, DefaultTimeout: l.cfg.DefaultTimeout,
		StallTimeout: l.cfg.StallTimeout, Naive: l.cfg.Naive, Hooks: l.cfg.Hooks, Log: l.log, Estimator: l.estimator,
	})}, {name: "barriers", props: barrierhost.NewHostProps(barrierhost.HostConfig{Log: l.log})}}
	for _, j := range shards {
		children = append(children, child{name: fmt.Sprintf("shard-%d", j), props: l.shardProps(j, false)})
	}
	sup, err := l.system.Root.SpawnNamed(nodeSupervisorProps(children), supName)
	if err != nil {
		l.transport.Unserve(dataAddr)
		return fmt.Errorf("start %s: %w", name, err)
	}
	if _, err := l.system.Root.RequestFuture(sup, ready{}, 10*time.Second).Result(); err != nil {
		return fmt.Errorf("node %s did not start: %w", name, err)
	}
	l.supervisors[i], l.storeNodes[i], l.stores[i], l.refs[i], l.alive[i] = sup, actor.NewPID(addr, ref.ActorId), store, ref, true
	l.publishLive()
	return nil
}

// Kill fails node i (fail-stop): its actors stop, its data is gone, its
// data plane endpoint closes, and the directory shards it hosted start on
// a live node, rebuilt from the other nodes' copies. Peers learn of the
// failure only through their watches and data connections. By the time
// Kill returns, events.NodeFailed about the node was published once.
func (l *Local) Kill(i int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i < 0 || i >= len(l.alive) || !l.alive[i] {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %d is not running", i)
	}
	l.alive[i] = false
	l.publishLive()
	name := nodeName(i)
	// This kill is announced anew. Forgetting the last one here, not in
	// Restart, keeps a late Terminated of the previous incarnation (a
	// shard that watches its dead PID only now) from announcing again.
	l.failures.Forget(name)
	gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s failed", name)
	l.transport.Unserve(l.refs[i].GetDataAddress())
	l.stores[i].Fail(gone)
	if err := l.stopNode(i); err != nil {
		// Fail-stop does not depend on the node's actors: its data and
		// data plane are already gone, and its shards move regardless.
		l.log.WithFields(logrus.Fields{"node": name, "error": err}).Warn("node did not stop in time; treating it as failed")
	}
	l.log.WithField("node", name).Warn("node killed (fault injection)")
	l.announceFailure(name)
	return l.moveShards(i)
}

// stopNode stops node i's supervisor and waits until it and every actor
// under it are gone. A stop request to the supervisor alone is not
// enough, because of two ways Proto.Actor lets an actor outlive it:
//   - a child whose backoff restart (it crashed just before) comes in
//     while it stops is restarted instead (handleRestart does not look
//     whether the actor is stopping);
//   - an actor that is stopping still handles user messages while it
//     waits for its children, and a child it spawns then (a store node's
//     reduce worker for a task that just came) is never told to stop.
//
// Either keeps the node from stopping, and its watchers (coordinators,
// shards, fetch sessions) never hear of its failure. So the node's actors
// are told to stop, again, until the supervisor is gone; an actor that
// already stops ignores it. The supervisor's children are told every
// 50 ms; every actor under it only from 500 ms on, every 500 ms, since
// finding those scans the whole process registry (most of a second on a
// loaded machine under -race). Callers hold l.mu.
func (l *Local) stopNode(i int) error {
	sup := l.supervisors[i]
	children := []*actor.PID{l.storeNodes[i], actor.NewPID(sup.GetAddress(), sup.GetId()+"/barriers")}
	table := *l.shardTable.Load()
	for j, host := range l.shardHost {
		if host == i {
			children = append(children, table[j])
		}
	}
	stopped := make(chan error, 1)
	fut := l.system.Root.StopFuture(sup) // waits up to protoactor's 10 s
	go func() { stopped <- fut.Wait() }()
	again := time.NewTicker(50 * time.Millisecond)
	defer again.Stop()
	for n := 1; ; n++ {
		select {
		case err := <-stopped:
			return err
		case <-again.C:
			pids := children
			if n%10 == 0 {
				pids = l.actorsUnder(sup)
			}
			for _, pid := range pids {
				l.system.Root.Stop(pid)
			}
		}
	}
}

// actorsUnder lists the running actors below sup (a child's id is its
// parent's id, a slash and its own name).
func (l *Local) actorsUnder(sup *actor.PID) []*actor.PID {
	prefix := sup.GetId() + "/"
	var out []*actor.PID
	for _, bucket := range l.system.ProcessRegistry.LocalPIDs.LocalPIDs {
		// IterCb, not Keys: Keys starts a goroutine per map shard.
		bucket.IterCb(func(id string, _ any) {
			if strings.HasPrefix(id, prefix) {
				out = append(out, actor.NewPID(sup.GetAddress(), id))
			}
		})
	}
	return out
}

// announceFailure makes sure NodeFailed is published for a killed node,
// exactly once. Directory shards that watched the node announce it as
// they see its Terminated (the first one wins, through l.failures); a
// node no shard watched (it never held a copy nor located one) is
// announced here. Callers hold l.mu, after the node stopped.
func (l *Local) announceFailure(name string) {
	// The node's Terminated is in every watching shard's system mailbox
	// once its supervisor stopped, and a shard handles system messages
	// before user messages: a reply to a query sent now comes after the
	// shard has seen the failure. Shards on the dead node do not answer
	// (dead letters); a shard stuck past the timeout loses the race to
	// this announcement, which l.failures keeps single.
	var asked []*actor.Future
	for _, shard := range *l.shardTable.Load() {
		asked = append(asked, l.system.Root.RequestFuture(shard, &messages.QueryObject{}, time.Second))
	}
	for _, f := range asked {
		_, _ = f.Result()
	}
	if l.failures.First(name) {
		l.log.WithField("node", name).Warn("node failed (no directory shard watched it)")
		l.system.EventStream.Publish(&events.NodeFailed{Node: name, DetectedBy: "kill", At: time.Now()})
	}
}

// moveShards restarts the shards node i hosted on live nodes. Each move is
// published at once: if a later one fails, the shards that did move are
// not left at their dead host's address. Callers hold l.mu.
func (l *Local) moveShards(from int) error {
	for j, host := range l.shardHost {
		if host != from {
			continue
		}
		to := -1
		for k := 1; k <= len(l.alive); k++ {
			if c := (from + k) % len(l.alive); l.alive[c] {
				to = c
				break
			}
		}
		if to < 0 {
			return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no live node can host shard %d", j)
		}
		res, err := l.system.Root.RequestFuture(l.supervisors[to], hostChild{child{name: fmt.Sprintf("shard-%d", j), props: l.shardProps(j, true)}}, 10*time.Second).Result()
		if err != nil {
			return fmt.Errorf("move shard %d to %s: %w", j, nodeName(to), err)
		}
		pid, ok := res.(*actor.PID)
		if !ok {
			return fmt.Errorf("move shard %d to %s: %v", j, nodeName(to), res)
		}
		// Copy on write: readers hold the table they loaded.
		table := slices.Clone(*l.shardTable.Load())
		l.shardHost[j], table[j] = to, pid
		l.shardTable.Store(&table)
	}
	return nil
}

// Restart brings a killed node back, empty: it can Put and Get again.
func (l *Local) Restart(i int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if i < 0 || i >= len(l.alive) || l.alive[i] {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %d is not down", i)
	}
	// l.failures is not told to forget the node here: see Kill.
	if err := l.startNode(i, nil); err != nil {
		return err
	}
	l.log.WithField("node", nodeName(i)).Info("node restarted, empty")
	return nil
}

// Alive reports whether node i is running.
func (l *Local) Alive(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.alive[i]
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// Nodes is the number of nodes (alive or not).
func (l *Local) Nodes() int { return len(l.alive) }

// System is the actor system every node runs in; application actors are
// spawned in it and subscribe to its EventStream.
func (l *Local) System() *actor.ActorSystem { return l.system }

// StoreNode is node i's store node: application actors send it Put, Get
// and Delete messages.
func (l *Local) StoreNode(i int) *actor.PID {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.storeNodes[i]
}

// Barriers is node i's barrier host (the managers of package barrier).
func (l *Local) Barriers(i int) *actor.PID {
	return actor.NewPID(l.system.Address(), nodeName(i)+"/barriers")
}

// Client is the Go API of node i.
func (l *Local) Client(i int) *storenode.Client {
	return storenode.NewClient(l.system.Root, l.StoreNode(i), l.cfg.DefaultTimeout)
}

// Node is node i's reference as it appears in directory records.
func (l *Local) Node(i int) *messages.NodeRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.refs[i]
}

// Store is node i's local store (for inspection in tests and tools).
func (l *Local) Store(i int) *storenode.Store {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stores[i]
}

// Shard is directory shard j where it runs now.
func (l *Local) Shard(j int) *actor.PID { return (*l.shardTable.Load())[j] }

// Stop stops every node and the actor system. Calling it again does nothing.
func (l *Local) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopLocked()
}

func (l *Local) stopLocked() {
	if l.stopped {
		return // Stop is idempotent: protoactor's Shutdown is not
	}
	l.stopped = true
	l.failures.Close()
	for i, ref := range l.refs {
		if ref != nil {
			l.transport.Unserve(ref.GetDataAddress())
		}
		if l.alive[i] && l.supervisors[i] != nil {
			_ = l.stopNode(i)
			l.alive[i] = false
		}
	}
	l.system.Shutdown()
}
