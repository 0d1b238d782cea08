// Package events defines the domain events Hoplite publishes on the actor
// system's EventStream, next to Proto.Actor's own *actor.SupervisorEvent,
// so that an application can watch failures being detected and repaired:
//
//	system.EventStream.Subscribe(func(e any) {
//		switch e := e.(type) {
//		case *events.NodeFailed: ...
//		}
//	})
//
// Events are published by the actor that observed what they describe, on
// its member's actor system. A member's event relay sends the recovery
// and collective ones (not the transfers', ReduceTree or BarrierState)
// to subscribers in other processes as messages.ClusterEvent: see
// cluster.Client.Events and `hoplite events`.
//
// Members are named by member id ("node-1", "node-1#1",
// "127.0.0.1:7001#5f0c2a91"), an actor of a member "<member id>/<actor>",
// and an address field (NodeFailed.Address) holds a host:port: see
// docs/operations.md, "How members are named".
package events

import "time"

// NodeFailed: a member (its store node) failed (fail-stop). Each member
// publishes it once per failed incarnation (member id and address) on its
// own actor system, from whichever path told it first: one of its
// directory shards saw the store node terminate, or the failure broadcast
// (revoke) delivered the notice and the member's view accepted it (a
// notice naming a member this member does not know, or knows at another
// address, is about another cluster's member of that name). An
// embedded cluster (cluster.Local) republishes it on the application's
// system once per failed member; nobody announces a Kill by hand.
type NodeFailed struct {
	Node string
	// Address is the failed incarnation's actor system address: with
	// Node, it names the incarnation (a member that starts again is
	// another one, even under the same name).
	Address string
	// DetectedBy is the actor that saw the Terminated, a shard written
	// "<member id>/shard-<j>", or "revoke:<member id>" when the failure
	// broadcast delivered it (the member that originated the notice).
	DetectedBy string
	// Forwarder is the member that passed the notice on to this one over
	// the binomial graph ("" when a shard saw it, or this member
	// originated it).
	Forwarder string
	At        time.Time
}

// SenderSwitched: a receiver lost its sender mid-transfer and resumed
// from another one at its current offset (only the missing bytes move).
type SenderSwitched struct {
	Object   string
	Receiver string
	From, To string
	Offset   int64 // where the receiver resumed; 0 if its copy was rewound
}

// TreeNodeReplaced: a Reduce lost the node holding a tree position; the
// next ready backup (or the next arrival) takes the position.
type TreeNodeReplaced struct {
	Reduce      string
	Position    int
	Failed      string // the source id that was lost
	Replacement string // "" while the position waits for an arrival
}

// AncestorsInvalidated: the ancestors of a replaced position cleared what
// they had reduced and pull again; other subtrees keep their progress.
type AncestorsInvalidated struct {
	Reduce    string
	Positions []int // parent first, the root last
}

// ShardRebuilt: a directory shard started again (after a crash, or on a
// new node after its host failed) and asked the store nodes to republish.
// Shard is "<member id>/shard-<j>", Host that member id.
type ShardRebuilt struct {
	Shard string
	Host  string
}

// ReduceDone: a Reduce answered. Err is nil on success.
type ReduceDone struct {
	Reduce  string
	Target  string
	Reduced []string
	Elapsed time.Duration
	Err     error
}

// AllReduceReplanned: a participant of an AllReduce failed, or the
// directory reported a source lost (no copy left), and its run could not
// go on without it (a sliced run needs every source; a tree needs n, and
// too few sources were left to make up n). The coordinator abandoned the
// run (its workers stopped, its copies of the target dropped) and
// reduces, then broadcasts, over the sources that still exist instead.
type AllReduceReplanned struct {
	Reduce string
	Node   string   // the failed participant's node ("": the directory reported a source lost that was never located)
	Lost   []string // the sources whose copy was on it
	Num    int      // how many sources the new tree reduces
	From   string   // the abandoned run's shape (cluster.ShapeSliced or ShapeDAry; "": nothing ran yet)
}

// TransferStarted: a receiver opened a stream of an object from a
// sender, from Offset (a broadcast tree's edge as it forms; after a
// SenderSwitched, the resumed stream). Published by the receiver.
type TransferStarted struct {
	Object   string
	Receiver string
	Sender   string
	Offset   int64
	Size     int64
	At       time.Time
}

// TransferEnded: that stream ended: the receiver's copy is whole (Err
// nil), or the stream failed or was cut (its sender failed, the fetch
// was cancelled). Published by the receiver.
type TransferEnded struct {
	Object   string
	Receiver string
	Sender   string
	Err      error
	At       time.Time
}

// ReduceTree: a Reduce's tree as it stands, published by its coordinator
// when a step changed it: a position filled by an arrival, its task sent
// or started, a position replaced after a failure, the Reduce answered.
type ReduceTree struct {
	Reduce string
	Target string
	Shape  string // cluster.ShapeDAry or ShapeChainLeaf
	Degree int
	Num    int   // positions (the sources reduced)
	Size   int64 // each source's bytes
	// L and B are the cost model's inputs; Costs its T(d) per degree
	// considered (empty while B is unknown).
	L     time.Duration
	B     float64
	Costs map[int]time.Duration
	// Knee says how a knee policy fixed Num ("" without one).
	Knee      string
	Positions []ReducePosition
	Done      bool // the Reduce answered
}

// ReducePosition is one position of a ReduceTree: the source placed
// there (its object and node; "" while open), its parent (-1: the root),
// the source's arrival rank, and State: open, ready (a leaf: its source
// is its output), waiting (its task is due), sent, reducing (its output
// streams) or done. Output is the object the position makes on Node
// (the source itself at a leaf, the target at the root, an internal
// object between): how far its copy there got is the position's
// progress.
type ReducePosition struct {
	Position int
	Parent   int
	Object   string
	Node     string
	Arrival  int
	State    string
	Output   string
}
