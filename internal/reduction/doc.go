// Package reduction runs Reduce: a Reduction (the pure core) places
// source objects as they arrive and decides which node reduces what.
// Every step takes an event and now and returns Effects: the outbox.Box
// every core returns (sends, timers, the nodes to watch, the domain
// events), and the knee's decision for the log. The Coordinator actor
// around it (internal/actors/coordactor) only turns messages into those steps and
// carries out what they return through the generic shell
// (internal/actors/shell.Carrier).
//
// A Reduction is a core that every shape shares (the request, the sources
// as they arrive, the plan, the nodes with tasks, the answer, and the
// output of every step) and, once the first arrival tells the sources'
// size, one shape that owns its own state: sources under the inline
// limit are reduced in the coordinator (inline.go); others in a d-ary or
// chain-leaf tree, with its repairs (tree.go); and an AllReduce of every
// source may instead be sliced, when the cost model prices it lower (see
// ShapeSliced): a reduce-scatter by one rotated chain per slice, then an
// all-gather into every participant's copy of the target, both run by the
// same workers (sliced.go). Under a knee policy the Reduction first gates
// (knee_phase.go): it records arrivals, asks a KneeGate how many to
// reduce (arming a KneeTimer for the gate's next deadline), and chooses
// the shape from what arrived, in arrival order, once the count is fixed.
// A sliced AllReduce that loses a participant gives way to a tree over
// the sources left (allreduce_replan.go). The tree shapes and the cost
// model are in internal/reduction/plan, the element-wise kernels in
// internal/reduction/kernel.
package reduction
