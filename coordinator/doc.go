// Package coordinator runs Reduce: a Reduction (the pure core) places
// source objects into a reduce tree as they arrive and decides which node
// reduces what. Under a knee policy the Reduction first gates: it records
// arrivals, asks a KneeGate how many to reduce (arming a KneeTimer for
// the gate's next deadline), and plans the tree from what arrived, in
// arrival order, once the count is fixed. Every step takes now and
// returns Effects: the outbox.Box every core returns (sends, timers, the
// nodes to watch, the domain events), and the knee's decision for the
// log. The Coordinator actor around it (actors/coordinator) only turns
// messages into those steps and carries out what they return through the
// generic shell (actors/shell.Carrier). An AllReduce of every source may instead be
// sliced, when the cost model prices it lower (see ShapeSliced): a
// reduce-scatter by one rotated chain per slice, then an all-gather into
// every participant's copy of the target, both run by the same workers.
// The tree shapes and the cost model are in coordinator/plan, the
// element-wise kernels in coordinator/kernel.
package coordinator
