// Package bench runs Hoplite's benchmark scenarios and reports them: the
// scenarios of the thesis's evaluation (p2p, broadcast, gather, reduce,
// allreduce, asynchrony, reduce degree, failure), run on an embedded
// cluster with an emulated per-node link or on the network-namespace
// testbed (bench/testbed) with one `hoplite node` per host; the naive
// baseline and the peers (OpenMPI, Dask, Gloo: scripts under bench/peers)
// in the same run; medians over repetitions against the ideal S/B; a
// table, RESULT lines, JSON and PNG plots.
//
// The runners are generic over a backend (the embedded cluster or the
// testbed's processes); the testbed driver never moves bulk bytes itself:
// the bench agent in each node creates the objects locally (Put from
// inside the node) and Gets with prefetch leave the bytes where they land.
package bench
