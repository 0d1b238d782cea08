// Package membername writes the actor of a member as users read it:
// "<member id>/<actor>" ("node-1/store", "127.0.0.1:7001#5f0c2a91/shard-3"),
// never by the name of the member's node supervisor ("node#<nonce>/store",
// an actor name that looks like a member id but is none).
//
// A member's actors live under a root named by its incarnation, which
// only the member and those that greeted it can tie to its member id:
// they Register the pair, and Actor and Error texts in this process
// name the actor by member id from then on. An actor of a member this
// process never heard of is written "<address>/<actor id>".
package membername

import (
	"strings"
	"sync"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// maxKnown bounds what a process remembers: a long-lived client of a
// churning cluster would otherwise keep every incarnation it ever saw.
// Past it the oldest go first; an error about a member that old names
// its actor by address.
const maxKnown = 4096

var known = struct {
	sync.Mutex
	byRoot map[string]string // address + "/" + root -> member id
	order  []string          // keys of byRoot, oldest first
}{byRoot: map[string]string{}}

// Register records that the actors under root at address are member's
// (its id). The same pair again is a no-op.
func Register(address, root, member string) {
	if address == "" || root == "" || member == "" {
		return
	}
	k := address + "/" + root
	known.Lock()
	defer known.Unlock()
	if old, ok := known.byRoot[k]; ok {
		if old != member {
			known.byRoot[k] = member
		}
		return
	}
	if len(known.order) >= maxKnown {
		delete(known.byRoot, known.order[0])
		known.order = known.order[1:]
	}
	known.byRoot[k] = member
	known.order = append(known.order, k)
}

// Member is the member id whose actors live under root at address (""
// when not registered).
func Member(address, root string) string {
	known.Lock()
	defer known.Unlock()
	return known.byRoot[address+"/"+root]
}

// Actor is pid as a user reads it: "<member id>/<actor>" when its root
// is registered, "<address>/<actor id>" otherwise (a bare actor id if
// pid has no address).
func Actor(pid *actor.PID) string {
	id := pid.GetId()
	root, rest, _ := strings.Cut(id, "/")
	if m := Member(pid.GetAddress(), root); m != "" {
		if rest == "" {
			return m
		}
		return m + "/" + rest
	}
	if pid.GetAddress() == "" {
		return id
	}
	return pid.GetAddress() + "/" + id
}

// Of is "<member>/<actor>" for the actor named id under member's root
// ("node#<nonce>/shard-3" of member node-1: "node-1/shard-3"): what an
// actor that knows its own member writes. id unchanged if member is "".
func Of(member, id string) string {
	if member == "" {
		return id
	}
	_, rest, ok := strings.Cut(id, "/")
	if !ok {
		return member
	}
	return member + "/" + rest
}
