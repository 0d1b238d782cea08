// Package member is what package cluster's Join and StartLocal run: a
// member of a Hoplite cluster and the embedded cluster of such members.
//
// A Member is one actor system with its node supervisor (supervisor.go),
// which starts its store node, its share of the directory shards and their
// coordinators, a barrier host and the failure broadcaster; the member
// actor (member_actor.go) keeps the view (internal/memberview) of the
// live members from the membership provider (the automanaged seeds,
// seed_provider.go and seed_roster.go, or etcd, etcd.go) and the
// handshakes, and moves shards when it changes. Join (member_boot.go)
// binds the ports, starts the actors and greets the members; the failure
// path (member_failure.go) turns probes and lost connections into
// suspicions that the revoke broadcast spreads; Leave and Stop
// (member_shutdown.go) move the shards off first. The warm-up (warmup.go)
// opens the data-plane connections and faults in the large buffers'
// memory before the first transfer needs them.
//
// Local (local.go) runs N members in one process, over an in-process
// membership (membership.go) and the in-memory data plane.
//
// Package cluster wraps these for applications: this package imports
// nothing of it, and its exported names are for cluster and the tests.
package member
