// Package testhooks holds the fault-injection points of a cluster
// member that only tests (and the recovery demos, which crash and slow
// members on purpose) set: hooks that run before the messages of its
// actors, delays, and the protocol version it claims. No operator sets
// them, so they are not in cluster's configurations, nor in `hoplite
// node -h` (its -test-* flags are hidden).
//
// A test puts a Set into a cluster configuration with In, as package
// experiments does for the benchmarks' switches.
package testhooks

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
)

// Set is the fault-injection points of one configuration. The zero Set
// injects nothing, and a nil hook costs nothing.
type Set struct {
	// Store are the points in the member's store node, each given the
	// node's name:
	//
	//   - BeforePutChunk(node, id, off) runs before a Put copies the
	//     chunk at off into the store;
	//   - BeforeFetchChunk(node, id, off) before a fetched chunk at off
	//     is stored;
	//   - BeforeReduceChunk(node, id, off) before a reduce task reads the
	//     chunk at off of its input id (a hook that sleeps makes a Reduce
	//     last long enough for a test to act inside it);
	//   - AroundReduceOutput(node, task, create) runs a reduce run's
	//     creation of its position's output and must call create once;
	//   - BeforeReceive(node, msg) runs in the store node actor before
	//     each message (a hook that panics crashes it, and its supervisor
	//     restarts it).
	Store storeactor.Hooks
	// Shard runs before each message a directory shard of the member
	// receives (a hook that panics crashes that shard).
	Shard func(shard string, msg any)
	// Coordinator runs before each message a Reduce's coordinator on the
	// member receives, with the Reduce's id (target#nonce). A hook that
	// panics crashes that coordinator: the Reduce fails with UNAVAILABLE.
	Coordinator func(reduce string, msg any)
	// Barrier runs before each message a barrier manager on the member
	// receives, with the manager's id. A hook that panics crashes that
	// manager: it restarts and gets the barrier's state back from its
	// peers.
	Barrier func(manager string, msg any)
	// ProbeDelay makes a member of processes wait this long before it
	// probes a member it suspects, and before it spreads the failure of a
	// member its provider's health checks dropped, so that it learns of
	// the failure from the others' notices first: a test that delays all
	// members but one sees that one's notice relayed over the overlay.
	// 0: probe at once. The embedded cluster's members ignore it.
	ProbeDelay time.Duration
	// ProtocolVersion, if not 0, is the member protocol version a member
	// of processes claims instead of cluster.ProtocolVersion (a test of
	// the handshake). The embedded cluster's members ignore it.
	ProtocolVersion uint32
}

// access are the ways In reaches a configuration's Set: packages cluster
// and internal/member keep it in an unexported field, out of the API an
// operator reads, and each registers its way in (Register) when it is
// initialised. Package initialisation runs before main and before any
// test, so access is only read once it is complete.
var access []func(cfg any) *Set

// Register is for packages cluster and internal/member only: f returns
// the Set inside cfg, one of its package's configurations, and nil for
// anything else.
func Register(f func(cfg any) *Set) { access = append(access, f) }

// In returns the Set of cfg, a *cluster.MemberConfig or *cluster.Config
// (or internal/member's own), for the caller to read or change; nil for
// any other type (or if no package that registers is linked in, when
// there is no such configuration).
func In(cfg any) *Set {
	for _, f := range access {
		if s := f(cfg); s != nil {
			return s
		}
	}
	return nil
}
