// Package cluster runs Hoplite members. A Member (Join; what `hoplite
// node` runs) is one actor system with its store node, its data plane, a
// share of the directory shards placed by rendezvous hashing over the
// live members, a barrier host, and a failure path: probes and remote
// endpoint loss raise a suspicion, the revoke broadcast spreads it over a
// binomial graph, every member delivers it once (events.NodeFailed) and
// moves the failed member's shards. StartLocal runs N such members in one
// process (Local): the same runtime, with an in-memory data plane and an
// in-process membership provider; Kill stops a member as SIGKILL would.
package cluster
