// Package layout states the rules the source tree follows, and its tests
// check them: actors live in internal/actors/ and internal/member/, algorithms
// live in pure core packages.
//
// Every package of the module is a core unless Shells names it (Cores
// names those under a Shells directory that are cores all the same: the
// internal ones, which are out of the public API). A core is a plain step
// machine: time comes in as a value, and every step returns
// what the shell should do. So every file of a core
//   - imports nothing of Proto.Actor but the actor package, and names
//     nothing of it but its PID address type;
//   - imports none of the Forbidden standard packages (locks, atomics,
//     contexts, files, sockets, the runtime);
//   - imports, of the module, only other cores and the Wire packages, so
//     that no core reaches a shell through another package;
//   - imports, outside the standard library and the module, only Allowed;
//   - has no go statement, no channel and no select, and calls no clock
//     function of package time (Now, Since, Sleep, After, timers...).
//
// The Store that holds a node's bytes is internal/objstore, a shell; the
// store node's protocols are the core internal/storeproto, which cannot
// reach it (a protocol asks for store operations; it holds no Store,
// Object or Writer). Package storenode is the public Client only.
//
// Every type with a Receive(actor.Context) method (an actor) is declared
// under internal/actors/ (the shells) or in internal/member (the member's
// supervisor and member actor, which wire the shells together); programs
// (cmd/, examples/, bench/) are applications and may define their own.
//
// The member is untied from its public face (Untied): package cluster is
// what a user calls (start, join, dial) over internal/member, which holds
// the member's machinery and imports nothing of cluster.
//
// No arrow runs back up: an internal package imports, of the public
// packages, only those UpImports names (with why).
//
// Every package has a name no other package of the module has (programs,
// all named main, and the fork under third_party aside), so that a name
// says which package it is and no file needs an import alias for a
// package of the module; Aliases lists the one exception.
package layout

// Shells are the module's packages that are not cores, each with why. A
// key ending in "/..." names a directory and everything under it; any
// other key names one package.
var Shells = map[string]string{
	"cluster/...":                 "the public face of a cluster: start, join and dial, over internal/member",
	"cmd/...":                     "programs",
	"examples/...":                "programs",
	"bench/...":                   "programs and their measurements",
	"internal/...":                "helpers of the shells and tests (actor requests, clocks, certificates), but the Cores",
	"internal/actors/...":         "the actor shells around the cores",
	"third_party/...":             "Proto.Actor, patched",
	"internal/liveview":           "the live view's HTTP server",
	"sim":                         "the simulator: drives the cores, writes reports and plots",
	"barrier":                     "the barrier API: blocking calls with deadlines over the participant actor",
	"internal/netmodel/estimator": "the network estimates a member's shells share: locked",
	"storenode":                   "the Client: calls with deadlines and retries over the store node's messages and the data plane",
	"actors":                      "the props of Hoplite's actors for an application's own actor system",
	"coordinator":                 "Reduce planning's public face: the core run with the members' settings (the store allocator's slice minimum)",
	"deploy/...":                  "a module of its own: the image's health probe and the tests of the image, the chart and the unit",
}

// Cores are packages under a Shells directory that are cores all the
// same: internal, so that they stay out of the public API. A key ending
// in "/..." names a directory and everything under it.
var Cores = []string{
	"internal/storeproto",      // the store node's protocols
	"internal/reduction/...",   // Reduce: the Reduction, its shapes, plans and kernels
	"internal/directory",       // the object directory's LocationTable
	"internal/revoke",          // the failure broadcast over the binomial graph
	"internal/outbox",          // the one output shape of every core
	"internal/netmodel",        // the estimates of L and B (the estimator beside it is a shell)
	"internal/barrier/handle",  // a barrier handle's side of the replicas
	"internal/barrier/policy",  // the partial barriers' decisions
	"internal/barrier/replica", // one barrier manager replica
	"internal/history",         // the chaos oracle's model of the fault model's promises
	"internal/barrier/tree",    // a barrier's combining tree
	"internal/nemesis",         // the network nemesis's schedules and command lines
	"internal/memberwatch",     // the automanaged members' watch of each other
	"internal/memberview",      // a member's membership view and the shard placement
	"internal/rendezvous",      // the rendezvous hash the placements share
}

// Wire are the module packages a core may import although they are not
// cores: the generated wire messages (the protobuf runtime they use keeps
// its own state) and Proto.Actor's actor package, of which a core names
// only PID.
var Wire = []string{
	"messages",
	"third_party/forked/protoactor-go/actor",
}

// Allowed are the packages outside the standard library and the module
// that a core may import: the wire's encoding, and the fingerprint's hash
// (a pure function of the bytes).
var Allowed = []string{"google.golang.org/protobuf/proto", "github.com/zeebo/xxh3"}

// Forbidden are the standard packages no core imports; each also forbids
// the packages under it (net forbids net/http).
var Forbidden = []string{"sync", "context", "io", "bufio", "os", "net", "syscall", "runtime", "log",
	"crypto/rand", "embed", "plugin"}

// ActorHomes are where actors may be declared, besides programs; the one
// helper outside them is the short-lived watched request behind every
// request-and-wait (internal/actorutil).
var ActorHomes = []string{"internal/actors/", "internal/member/", "internal/actorutil/"}

// Programs are applications of the library, free to define actors.
var Programs = []string{"cmd/", "examples/", "bench/"}

// Aliases are the import aliases a file may give a package of the module
// (path relative to the module root), each with the one alias allowed: a
// package of the fork whose name is also one of Hoplite's. Hoplite's
// cluster package imports the fork's cluster package; unaliased, inside
// package cluster, cluster.Config would name the fork's type.
var Aliases = map[string]string{
	"third_party/forked/protoactor-go/cluster": "pcluster",
}

// UpImports are the public packages of the module that an internal
// package may import (in its non-test files), each with why; the fork
// under third_party is Proto.Actor, which every shell imports. Any other
// public package is the API, built on internal/, never under it.
var UpImports = map[string]string{
	"messages":    "the wire: every message that may cross a process",
	"events":      "the domain events the shells publish",
	"fingerprint": "an object's contents in 64 bits, computed alike by store nodes, coordinators and the directory",
}

// Experiments is where what only a measurement runs lives: the
// experiments' switches and the baselines Hoplite is measured against
// (this package and those under it). No actor shell (internal/actors/...)
// and no core imports it, and neither the wire messages nor a production
// package under internal/ declares a function, type, value or field named for a baseline
// (Baselines): the shells and cores serve production only, and a
// baseline is wired into them from outside through their ordinary
// configuration (the naive Reduce is a receiver middleware the member
// puts before its store node; the naive Get, the sender policy it gives
// its directory shards, directory.TableConfig.Senders).
const Experiments = "internal/experiments"

// Baselines are the words that name a baseline's code.
var Baselines = []string{"naive"}

// Configs are the configuration types an operator or an application
// fills in, by package. None exports a field of a function type or one
// whose doc speaks of tests or fault injection: the fault-injection
// points live in internal/testhooks and the benchmarks' switches in
// Experiments, each reached through an unexported field.
var Configs = map[string][]string{"cluster": {"MemberConfig", "Config"}}

// Untied are the public packages whose member machinery lives in an
// internal package of its own, each with that package: cluster is the
// face a user calls (StartLocal, Join, Dial and what they return), thin
// wrappers with their own documentation over internal/member, which
// holds the member (its actor system, boot, failure path, view, seeds,
// etcd provider, warm-up) and the embedded cluster of members. The
// member package imports no package of its face's directory, directly or
// through another; the face declares no actor (ActorHomes) and imports,
// of the actor shells (internal/actors/), only FaceShells.
var Untied = map[string]string{"cluster": "internal/member"}

// FaceShells are the actor shells an Untied face may import, each with
// why: the member package wires every other one.
var FaceShells = map[string]string{
	"internal/actors/barrieractor": "a barrier handle's participant actor, which the application spawns in its own actor system (ParticipantProps)",
}

// Facade are the files of a package that are a face over the rest of
// it: in internal/member, the embedded cluster (StartLocal, Local) over
// the member, what one `hoplite node` process or one embedded member runs
// (its actor system, store node, shards, coordinators, barrier host,
// membership). The arrow runs one way: no member file names what a
// facade file declares, and a facade file declares no method on a
// member's type, so the member's files could be a package of their own
// with the embedded cluster on top.
var Facade = map[string][]string{"internal/member": {"local.go", "local_ui.go"}}

// Knots are the cycles left between the files of a package by the types
// they name (a file naming a type another file declares, which names one
// of the first's, as a method's receiver or a field), each as the
// package's directory and its files in order, with what is left to do.
// The knot test, over the packages Facade and Untied name, fails for any
// other such cycle, and for an entry here that is no longer one.
var Knots = map[string]string{}
