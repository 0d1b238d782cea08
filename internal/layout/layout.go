// Package layout states the rule the source tree follows, and its test
// checks it: actors live in actors/ and cluster/, algorithms live in pure
// packages.
//
// Every type with a Receive(actor.Context) method — an actor — is declared
// under actors/ (the shells) or in cluster (the member's supervisor and
// member actor, which wire the shells together); programs (cmd/, examples/,
// bench/) are applications and may define their own. The pure packages in
// Pure import nothing of Proto.Actor but its PID address type, start no
// goroutine and read no clock: time comes in as a value, and every step
// returns what to send (outbox) for a shell to carry out.
package layout

// Pure lists the pure packages, relative to the module root, and the pure
// files of storenode, whose package also holds the concurrent Store and
// the Client.
var Pure = []string{
	"storenode/delete_protocol.go",
	"storenode/fetch_protocol.go",
	"storenode/position_runs.go",
	"storenode/put_protocol.go",
	"barrier/handle",
	"barrier/policy",
	"barrier/replica",
	"coordinator",
	"coordinator/kernel",
	"coordinator/plan",
	"directory",
	"netmodel",
	"outbox",
	"revoke",
}

// ActorHomes are where actors may be declared, besides programs; the one
// helper outside them is the short-lived watched request behind every
// request-and-wait (internal/actorutil).
var ActorHomes = []string{"actors/", "cluster/", "internal/actorutil/"}

// Programs are applications of the library, free to define actors.
var Programs = []string{"cmd/", "examples/", "bench/"}
