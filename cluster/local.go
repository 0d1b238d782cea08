package cluster

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/actors/directory"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/coordinator/plan"
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
	// ChunkSize is the copy and streaming unit (default 1 MiB).
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
	// Log receives the cluster's logs and Proto.Actor's (default: logrus's
	// standard logger).
	Log *logrus.Logger
}

// Local is an embedded cluster: N logical nodes in one process.
type Local struct {
	cfg         Config
	system      *actor.ActorSystem
	transport   *transport.Memory
	supervisors []*actor.PID
	storeNodes  []*actor.PID
	shards      []*actor.PID
	stores      []*storenode.Store
	refs        []*messages.NodeRef
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
	system := actor.NewActorSystem(actorSystemOptions(cfg.Log)...)
	l := &Local{cfg: cfg, system: system, transport: transport.NewMemory(cfg.LinkBandwidth)}
	addr := system.Address()
	for j := 0; j < cfg.Shards; j++ {
		l.shards = append(l.shards, actor.NewPID(addr, fmt.Sprintf("%s/shard-%d", nodeName(j%cfg.Nodes), j)))
	}
	shardFor := func(id string) *actor.PID { return l.shards[directory.ShardIndex(id, len(l.shards))] }
	log := logrus.NewEntry(cfg.Log)
	// One process, one network: every node shares the measurements.
	// Until transfers are measured, B is the emulated link if there is one.
	bandwidth := 1.25e9
	if cfg.LinkBandwidth > 0 {
		bandwidth = cfg.LinkBandwidth
	}
	estimator := plan.NewEstimator(100*time.Microsecond, bandwidth)
	inline := cfg.InlineLimit
	if inline == 0 {
		inline = 64 << 10
	}
	coordinatorConfig := coordinator.ActorConfig{ShardFor: shardFor, Estimator: estimator, Log: log,
		Reduce: coordinator.Config{InlineLimit: inline, Shape: cfg.ReduceShape, ForceDegree: cfg.ReduceDegree}}
	newCoordinator := func(id string, start *messages.StartReduce, requester *actor.PID) *actor.Props {
		return coordinator.NewProps(coordinatorConfig, id, start, requester)
	}
	for i := 0; i < cfg.Nodes; i++ {
		name := nodeName(i)
		store := storenode.NewStore(cfg.Capacity)
		dataAddr, err := l.transport.Serve(name, store)
		if err != nil {
			l.Stop()
			return nil, err
		}
		ref := &messages.NodeRef{NodeId: name, Address: addr, ActorId: name + "/store", DataAddress: dataAddr}
		children := []child{{name: "store", props: storenode.NewProps(storenode.Config{
			Self: ref, Store: store, ShardFor: shardFor, Transport: l.transport,
			ChunkSize: cfg.ChunkSize, InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout,
			StallTimeout: cfg.StallTimeout, Naive: cfg.Naive, Hooks: cfg.Hooks, Log: log, Estimator: estimator,
		})}}
		for j := i; j < cfg.Shards; j += cfg.Nodes {
			children = append(children, child{name: fmt.Sprintf("shard-%d", j), props: directory.NewShardProps(directory.ShardConfig{
				Table: directory.TableConfig{InlineLimit: cfg.InlineLimit}, Log: log, NewCoordinator: newCoordinator,
			})})
		}
		sup, err := system.Root.SpawnNamed(nodeSupervisorProps(children), name)
		if err != nil {
			l.Stop()
			return nil, fmt.Errorf("start %s: %w", name, err)
		}
		l.supervisors = append(l.supervisors, sup)
		l.storeNodes = append(l.storeNodes, actor.NewPID(addr, ref.ActorId))
		l.stores = append(l.stores, store)
		l.refs = append(l.refs, ref)
	}
	for _, sup := range l.supervisors {
		if _, err := system.Root.RequestFuture(sup, ready{}, 10*time.Second).Result(); err != nil {
			l.Stop()
			return nil, fmt.Errorf("node %s did not start: %w", sup.GetId(), err)
		}
	}
	cfg.Log.WithFields(logrus.Fields{"nodes": cfg.Nodes, "shards": cfg.Shards}).Info("embedded cluster started")
	return l, nil
}

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// Nodes is the number of nodes.
func (l *Local) Nodes() int { return len(l.storeNodes) }

// System is the actor system every node runs in; application actors are
// spawned in it and subscribe to its EventStream.
func (l *Local) System() *actor.ActorSystem { return l.system }

// StoreNode is node i's store node: application actors send it Put, Get
// and Delete messages.
func (l *Local) StoreNode(i int) *actor.PID { return l.storeNodes[i] }

// Client is the Go API of node i.
func (l *Local) Client(i int) *storenode.Client {
	return storenode.NewClient(l.system.Root, l.storeNodes[i], l.cfg.DefaultTimeout)
}

// Node is node i's reference as it appears in directory records.
func (l *Local) Node(i int) *messages.NodeRef { return l.refs[i] }

// Store is node i's local store (for inspection in tests and tools).
func (l *Local) Store(i int) *storenode.Store { return l.stores[i] }

// Shard is directory shard j.
func (l *Local) Shard(j int) *actor.PID { return l.shards[j] }

// Stop stops every node and the actor system.
func (l *Local) Stop() {
	for _, ref := range l.refs {
		l.transport.Unserve(ref.GetDataAddress())
	}
	for _, sup := range l.supervisors {
		_ = l.system.Root.StopFuture(sup).Wait()
	}
	l.system.Shutdown()
}
