// Package sim is a deterministic discrete-event simulator of a Hoplite
// cluster in virtual time that drives the project's real pure cores: the
// directory's LocationTable (one per shard), the store node's
// FetchProtocol over a real Store (every Get), the coordinator's
// Reduction (every Reduce and AllReduce, both AllReduce shapes), the
// revoke Broadcaster on the
// binomial graph (failure notices) and the barrier policy.
//
// Only the network and the hosts are modelled: each host has an uplink
// and a downlink of bandwidth B (TCP payload rate) and latency L; streams
// move chunks over them, sharing each link max-min fairly (rates
// recomputed when a stream starts, stalls or ends); every control
// message costs a per-message processing time at the queue it reaches (a
// store node, a directory shard, a coordinator, the failure
// broadcaster), so a hot shard queues. No byte moves: a copy's content is
// a checksum carried through the cores' decisions, so exactness can be
// checked. The same Config gives the same timeline, event for event.
//
// Every core runs through one driver (core.go), the actor shell's
// driver in virtual time; what a core's addresses mean here is wired
// once per core (dir.go, fetch.go, reduce.go, notice.go, barrier.go),
// and the engine (engine.go), the network (net.go) and the data plane
// (world.go) know nothing of the cores. See docs/simulator.md for the model and its
// validation against the testbed.
package sim
