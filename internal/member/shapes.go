package member

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
