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
//
// # Run order
//
// A comparison's (one scenario, size and interval) repetitions are
// interleaved across its systems, so that drift in the machine's load
// falls on every system alike rather than on whichever ran last: first
// a best peer's sweep (every algorithm with --reps, unrecorded; it
// chooses the algorithm that column then forces) and every system's
// warm-ups, then round k runs measured repetition k of every system,
// the order rotated by one each round (round 2 starts with the second
// system). Ours's systems (ours, naive, the forced degrees and shapes,
// ours-tls, ...) keep one cluster each, started at their first warm-up,
// for the whole run; on the testbed all their node sets are up at once,
// idle but for their heartbeats while another system runs, peers'
// launches included (a run whose sets may not fit in memory runs
// sequentially instead, with a note). A
// peer (mpi, gloo, dask) is launched once per measured repetition with
// --reps 1: its script runs its own warm-up in the same launch, then the
// one timed repetition. The failure scenario gives every repetition a
// fresh cluster with its own warm-ups, and runs its rounds in
// two phases per comparison: the failure-free systems', then the
// failure variants', each killed at 50 % of its shape's failure-free
// median from the first phase.
//
// # Warm-ups, fresh clusters and load
//
// By default nothing is warmed up (Options.Warmup 0): every recorded
// repetition of ours is an operation as an application runs it, its
// first one included. --warmup N runs N unrecorded repetitions on each
// cluster first and, in rounds, one before each recorded rep. --fresh
// (Options.Fresh) starts a new cluster for every recorded repetition, so
// that the first operation's cost is a figure of its own. --load N
// (Options.Load) runs N CPU-bound processes (`hoplite bench load-spin`,
// load.go) beside the cluster for the whole run; each ends by itself
// after Options.LoadFor or when its standard input, held by the run,
// closes. Every recorded repetition records the one-minute load average
// as it ended (Result.Load), the report the run's range (Report.Load),
// and a system whose median load differs from ours's by a CPU and a quarter or more
// (LoadDiffers) is marked in the table, the RESULT line and `hoplite
// bench report`.
//
// Options.Sequential (hoplite bench --sequential) runs each system's
// repetitions back to back instead, one system after another, and each
// peer in one launch of --reps: the order before interleaving (with
// --tls, ours and ours-tls still alternate); --profile implies it, as
// its window must hold ours's repetitions alone. The report's run_order
// and first note say which order ran, and each recorded time's order[]
// entry its repetition and its sequence number among all the run's
// steps (warm-ups and peer launches included).
package bench
