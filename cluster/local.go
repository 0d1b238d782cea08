package cluster

import (
	"context"
	"log/slog"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// Config configures an embedded cluster. Zero fields take the defaults.
type Config struct {
	// Nodes is the number of members (at least 1).
	Nodes int
	// Shards is the number of directory shards (default Nodes), placed on
	// the members by rendezvous hashing as in a cluster of processes.
	Shards int
	// Capacity is each node's store size in bytes (default 1 GiB).
	Capacity int64
	// ChunkSize is the copy and streaming unit; 0 adapts it to the
	// measured bandwidth (see MemberConfig.ChunkSize).
	ChunkSize int
	// InlineLimit: smaller objects live in the directory (default 64 KiB).
	InlineLimit int64
	// LinkBandwidth emulates each node's uplink and downlink in bytes per
	// second on the in-memory data plane; 0 is unlimited (memory speed).
	LinkBandwidth float64
	// DefaultTimeout bounds calls that carry no deadline (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer without progress (default 10s).
	StallTimeout time.Duration
	// Log receives the cluster's logs and Proto.Actor's, at its own level.
	// Set Log or Logger, not both; with neither, the cluster logs
	// warnings and errors on stderr.
	Log *logrus.Logger
	// Logger, if set, receives the cluster's logs and Proto.Actor's as
	// slog records: an application that logs through log/slog gets
	// Hoplite's records in its own stream (Proto.Actor's info records and
	// the errors that are the normal life of a cluster come at debug,
	// repeats throttled). The cluster asks its handler for the lowest
	// level it enables once, when it starts: records below it are not
	// made.
	Logger *slog.Logger
	// UI, if set, serves the live view (package liveview) of the cluster
	// at http://UI/live/ (HOST:PORT; port 0 picks one, see Local.UIAddr)
	// until Stop. Read-only, plain HTTP: bind it where only those who may
	// watch can reach it.
	UI string
	// LocateDeputies is every member's MemberConfig.LocateDeputies.
	LocateDeputies int

	// exp are the experiments (internal/experiments) every member runs
	// with.
	exp experiments.Set
	// hooks are the fault-injection points (internal/testhooks) of
	// every member.
	hooks testhooks.Set
}

// member is c as package member takes it: the same fields, and the
// experiments and fault-injection points only this module sets.
func (c Config) member() member.Config {
	var mc member.Config
	mc.Nodes = c.Nodes
	mc.Shards = c.Shards
	mc.Capacity = c.Capacity
	mc.ChunkSize = c.ChunkSize
	mc.InlineLimit = c.InlineLimit
	mc.LinkBandwidth = c.LinkBandwidth
	mc.DefaultTimeout = c.DefaultTimeout
	mc.StallTimeout = c.StallTimeout
	mc.Log = c.Log
	mc.Logger = c.Logger
	mc.UI = c.UI
	mc.LocateDeputies = c.LocateDeputies
	*experiments.In(&mc) = c.exp
	*testhooks.In(&mc) = c.hooks
	return mc
}

// Local is an embedded cluster: N members of the same runtime that
// `hoplite node` runs, in one process. Each member has its own actor
// system on a loopback port (control messages cross Proto.Actor remote,
// as between processes); only two things differ from a cluster of
// processes: members find each other through an in-process membership
// service, and object bytes move on the in-memory data plane (with its
// emulated links).
type Local struct {
	l *member.Local
}

// StartLocal starts an embedded cluster and returns once every member
// has joined, every member sees all of them and the directory shards run
// where the placement puts them.
func StartLocal(cfg Config) (*Local, error) {
	l, err := member.StartLocal(cfg.member())
	if err != nil {
		return nil, err
	}
	return &Local{l: l}, nil
}

// Member is node i's current incarnation.
func (l *Local) Member(i int) *Member { return wrap(l.l.Member(i)) }

// Client is the Go API of node i, in node i's own actor system (what an
// application that embeds a member uses).
func (l *Local) Client(i int) *storenode.Client { return l.Member(i).Client() }

// BarrierHosts lists the barrier hosts of the live members
// (barrier.Cluster).
func (l *Local) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	return barrierHosts(l.l.LiveBarrierHosts()), nil
}

// Kill fails node i the way SIGKILL fails a process: nobody can reach its
// actors or its data any more, its membership entry goes, and its actors
// stop without telling anyone. Nobody announces the failure: the other
// members detect it through their own failure path (the membership's
// topology, broken remote endpoints and data connections, confirmed and
// spread over the binomial graph). Kill returns once every live member
// has delivered the failure (events.NodeFailed was published) and the
// directory shards node i hosted run on the survivors.
func (l *Local) Kill(i int) error { return l.l.Kill(i) }

// Restart starts a new incarnation of a killed node (member id node-i#k),
// empty; it joins as a process would, and takes its share of the shards.
func (l *Local) Restart(i int) error { return l.l.Restart(i) }

// Alive reports whether node i is running.
func (l *Local) Alive(i int) bool { return l.l.Alive(i) }

// UIAddr is where the live view is served (Config.UI), "" if it is not.
func (l *Local) UIAddr() string { return l.l.UIAddr() }

// Nodes is the number of nodes (alive or not).
func (l *Local) Nodes() int { return l.l.Nodes() }

// System is the application's actor system: application actors are
// spawned in it, and its EventStream carries every member's domain
// events (events.NodeFailed once per failed member) and Proto.Actor's
// supervisor events.
func (l *Local) System() *actor.ActorSystem { return l.l.System() }

// StoreNode is node i's store node: application actors send it Put, Get
// and Delete messages.
func (l *Local) StoreNode(i int) *actor.PID { return l.l.StoreNode(i) }

// IndexOf is the index of the node whose current incarnation is member
// id (barrier.Barrier.Replicas names members), or -1.
func (l *Local) IndexOf(id string) int { return l.l.IndexOf(id) }

// Barriers is node i's barrier host (the managers of package barrier).
func (l *Local) Barriers(i int) *actor.PID { return l.l.Barriers(i) }

// Node is node i's reference as it appears in directory records.
func (l *Local) Node(i int) *messages.NodeRef { return l.l.Node(i) }

// Written is how many bytes of object id node i's store holds, 0 when it
// holds no copy: a copy still filling shows its progress (for inspection
// in tests and tools, such as the demo's progress bars).
func (l *Local) Written(i int, id string) int64 {
	if o := l.l.Store(i).Lookup(id); o != nil {
		w, _, _ := o.Progress()
		return w
	}
	return 0
}

// Objects lists the ids of the copies node i's store holds, whole or
// filling (for inspection in tests and tools).
func (l *Local) Objects(i int) []string {
	objs := l.l.Store(i).Objects()
	ids := make([]string, len(objs))
	for j, o := range objs {
		ids[j] = o.ID()
	}
	return ids
}

// Shard is directory shard j where it runs now (as the first live member
// places it).
func (l *Local) Shard(j int) *actor.PID { return l.l.Shard(j) }

// NodeOf is the index of the node whose actor system is at address, or
// -1.
func (l *Local) NodeOf(address string) int { return l.l.NodeOf(address) }

// Stop stops every member and the application's actor system, together:
// no member takes another's stop for a failure or a leave, so none
// spreads a failure notice, moves or rebuilds a shard, or logs any of it.
// Calling it again does nothing.
func (l *Local) Stop() { l.l.Stop() }

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (l *Local) ParticipantProps(cfg participant.Config) *actor.Props {
	return l.l.ParticipantProps(cfg)
}

// The experiments' and the fault injection's ways into the
// configurations: only code of this module (bench, tests, `hoplite node
// -experiments` and its -test-* flags) reaches the unexported fields.
func init() {
	experiments.Register(func(cfg any) *experiments.Set {
		switch c := cfg.(type) {
		case *MemberConfig:
			return &c.exp
		case *Config:
			return &c.exp
		}
		return nil
	})
	testhooks.Register(func(cfg any) *testhooks.Set {
		switch c := cfg.(type) {
		case *MemberConfig:
			return &c.hooks
		case *Config:
			return &c.hooks
		}
		return nil
	})
}
