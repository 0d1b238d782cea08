// Package coordinator runs Reduce: a Reduction (the pure core) places
// source objects into a reduce tree as they arrive and decides which node
// reduces what; the Coordinator actor around it subscribes to the sources'
// locations and sends the decisions out. The tree shapes and the cost
// model are in coordinator/plan, the element-wise kernels in
// coordinator/kernel.
package coordinator
