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
// Events are published by the actor that observed what they describe and
// are never sent across processes.
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
	// DetectedBy is the actor that saw the Terminated (a shard's id) or
	// "revoke:<member>" when the failure broadcast delivered it.
	DetectedBy string
	At         time.Time
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
	From   string   // the abandoned run's shape (coordinator.ShapeSliced or ShapeDAry; "": nothing ran yet)
}
