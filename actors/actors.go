// Package actors holds what an application needs to run Hoplite's actors
// in an actor system of its own: the props of a store node (StoreNode) and
// a directory shard (Shard) with the coordinators of its Reduces
// (CoordinatorConfig), the data plane the store nodes move objects'
// bytes on (Transport), the supervision their parent gives them
// (Supervision), and which shard owns an object (ShardFor). cluster.Join wires the same actors into a member
// with its membership, failure detection and data plane; use this
// package when the application owns the actor system and that wiring.
//
// What each answers (the messages are in package messages; between store
// nodes, objects' bytes move on the Transport):
//
//   - A store node serves an application: Put (PutReply), Get
//     (GetReply), Delete (DeleteReply), Reduce (ReduceReply: it starts the
//     Reduce at the target's shard), QueryObject (ObjectInfo) and
//     WaitObjects (WaitObjectsReply). From the shards and coordinators it
//     takes CreateObjectReply, Republish, DropObject and the reduce tasks
//     (ReduceTask, ReduceTaskBatch, ReduceRelease, ReduceInvalidate,
//     ReduceCommit, StoreReduced).
//   - A directory shard serves the store nodes: CreateObject,
//     PublishLocation, UnpublishLocation, Locate, CancelLocate, FetchDone,
//     FetchAborted, DeleteObject, ReportLost, Subscribe, Unsubscribe,
//     QueryObject, ListObjects, StartReduce and ReleaseTarget. It spawns
//     the coordinator of each Reduce whose target it owns, as its child,
//     and stops (never restarts) one that fails: that Reduce fails
//     UNAVAILABLE and its caller may retry.
//   - A coordinator runs one Reduce: it takes its sources' LocationUpdate
//     and its workers' ReduceTaskStarted, ReduceTaskDone and
//     StoreReducedReply, and answers the requester with a ReduceReply. It
//     exists only as the child of the shard that reserved its target for
//     it (a coordinator elsewhere fails UNAVAILABLE at its commit), so
//     there are no props of its own: CoordinatorConfig configures those a
//     shard spawns.
//
// A shard's state is soft: restarted, it asks every store node that Nodes
// lists to republish what it holds.
package actors

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/coordactor"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// Store holds one node's objects: their bytes as they arrive, which
// copies are pinned, and LRU eviction under a capacity. The store node
// serves from it, and the data plane reads from it concurrently; it
// outlives restarts of the store node actor.
type Store = objstore.Store

// NewStore returns an empty Store of capacity bytes.
func NewStore(capacity int64) *Store { return objstore.NewStore(capacity) }

// StoreNodeConfig is what a store node needs.
type StoreNodeConfig struct {
	// Self names the node: its id, the address and id of its actor (as
	// it will be spawned), and the data address at which Transport
	// serves its Store.
	Self *messages.NodeRef
	// Store holds the node's objects; it outlives restarts of the actor.
	Store *Store
	// ShardFor returns the directory shard that owns an object id (see
	// ShardFor).
	ShardFor func(objectID string) *actor.PID
	// Transport moves objects' bytes between store nodes.
	Transport *Transport
	// InlineLimit: objects smaller than this live in the directory and
	// need no transfer (default 64 KiB; the shards' must be the same).
	InlineLimit int64
	// DefaultTimeout applies to requests that carry none (default 30s).
	DefaultTimeout time.Duration
	// StallTimeout abandons a transfer that makes no progress for this
	// long and looks for another sender (default 10s).
	StallTimeout time.Duration
	// Log is where the node logs (default: logrus's standard logger).
	Log *logrus.Entry
}

// StoreNode returns the props of a store node.
func StoreNode(cfg StoreNodeConfig) *actor.Props {
	return storeactor.NewProps(storeactor.Config{Self: cfg.Self, Store: cfg.Store, ShardFor: cfg.ShardFor,
		Transport: cfg.Transport.data(), InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout,
		StallTimeout: cfg.StallTimeout, Log: cfg.Log})
}

// ShardConfig is what a directory shard needs.
type ShardConfig struct {
	// Index and Count place the shard among all shards (see ShardFor).
	Index, Count int
	// Nodes lists the live store nodes, which a (re)started shard asks to
	// republish what they hold.
	Nodes func() []*messages.NodeRef
	// InlineLimit is the store nodes' (default 64 KiB).
	InlineLimit int64
	// Coordinator configures the coordinators the shard spawns.
	Coordinator CoordinatorConfig
	// Log is where the shard logs (default: logrus's standard logger).
	Log *logrus.Entry
}

// Shard returns the props of a directory shard.
func Shard(cfg ShardConfig) *actor.Props {
	cc := cfg.Coordinator
	if cc.InlineLimit == 0 {
		cc.InlineLimit = cfg.InlineLimit
	}
	if cc.Log == nil {
		cc.Log = cfg.Log
	}
	return shardactor.NewShardProps(shardactor.ShardConfig{Table: directory.TableConfig{InlineLimit: cfg.InlineLimit},
		Index: cfg.Index, Count: cfg.Count, Nodes: cfg.Nodes, Log: cfg.Log,
		NewCoordinator: func(reduceID string, start *messages.StartReduce, requester *actor.PID, shardStopped func() bool) *actor.Props {
			return coordactor.NewProps(cc.config(), reduceID, start, requester, shardStopped)
		}})
}

// CoordinatorConfig is what the coordinators of one shard share.
type CoordinatorConfig struct {
	// Self is the store node that stores an inline AllReduce's result
	// (nil: the caller's).
	Self *messages.NodeRef
	// ShardFor returns the directory shard that owns an object id: a
	// coordinator subscribes there to its sources' locations.
	ShardFor func(objectID string) *actor.PID
	// InlineLimit: sources smaller than this are reduced in the
	// coordinator (default: the shard's).
	InlineLimit int64
	// Log is where coordinators log.
	Log *logrus.Entry
}

func (c CoordinatorConfig) config() coordactor.ActorConfig {
	return coordactor.ActorConfig{Self: c.Self, ShardFor: c.ShardFor, Log: c.Log,
		Reduce: reduction.Config{InlineLimit: c.InlineLimit}}
}

// ShardFor returns the function that maps an object id to the shard of
// shards that owns it: the hash every store node, shard and coordinator
// must agree on (shards[i] is the shard of Index i).
func ShardFor(shards []*actor.PID) func(objectID string) *actor.PID {
	return func(id string) *actor.PID { return shards[directory.ShardIndex(id, len(shards))] }
}

// Supervision is the strategy a member's supervisor gives its store node
// and shards: a child that panics is restarted alone, after 10 ms times
// the failures it had in a row (a failure more than 10 s after the last
// starts the count again). A restart keeps the actor's PID, so its peers
// need not learn a new one; the Store keeps the node's objects, and a
// shard rebuilds its state from the store nodes.
func Supervision() actor.SupervisorStrategy { return actorutil.Supervision() }
