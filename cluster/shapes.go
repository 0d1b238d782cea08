package cluster

import "github.com/hoplite-go/hoplite/internal/actors/storeactor"

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

// Hooks are test and fault-injection points in every store node of a
// member (MemberConfig.Hooks, Config.Hooks); a nil hook costs nothing.
// Each gets the node's name:
//
//   - BeforePutChunk(node, id, off) runs before a Put copies the chunk
//     at off into the store;
//   - BeforeFetchChunk(node, id, off) before a fetched chunk at off is
//     stored;
//   - BeforeReduceChunk(node, id, off) before a reduce task reads the
//     chunk at off of its input id (a hook that sleeps makes a Reduce
//     last long enough for a test to act inside it);
//   - AroundReduceOutput(node, task, create) runs a reduce run's creation
//     of its position's output and must call create once;
//   - BeforeReceive(node, msg) runs in the store node actor before each
//     message (a hook that panics crashes it, and its supervisor restarts
//     it).
type Hooks = storeactor.Hooks
