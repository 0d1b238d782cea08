// Package outbox is what a pure protocol step hands its actor shell: the
// messages to send and the timers to arm. Every pure core (the location
// table, the Reduction, the fetch and put protocols, the revoke
// broadcaster, the barrier replica) returns these, so every shell drains
// them the same way and a simulation can deliver them instead.
package outbox

import (
	"time"

	"google.golang.org/protobuf/proto"
)

// Send is one message to deliver. To names the receiver in the core's own
// terms: a *messages.NodeRef (a member's store node), a member name, or
// the opaque reply target the shell passed in with the request. The core
// never sees an actor; the shell resolves To.
type Send struct {
	To  any
	Msg proto.Message
}

// Timer asks the shell to hand Msg back to the core at At. Cores read no
// clock: At was computed from the now the step was given.
type Timer struct {
	At  time.Time
	Msg any
}

// Box collects the sends and timers of one step, in order.
type Box struct {
	Sends  []Send
	Timers []Timer
}

// Send appends a message to deliver; a nil receiver has nobody to answer
// (a tell) and is dropped here, so cores need not check.
func (b *Box) Send(to any, msg proto.Message) {
	if to == nil || msg == nil {
		return
	}
	b.Sends = append(b.Sends, Send{To: to, Msg: msg})
}

// After asks for msg back at at.
func (b *Box) After(at time.Time, msg any) {
	b.Timers = append(b.Timers, Timer{At: at, Msg: msg})
}

// Merge appends another step's sends and timers after this one's.
func (b *Box) Merge(o Box) {
	b.Sends = append(b.Sends, o.Sends...)
	b.Timers = append(b.Timers, o.Timers...)
}

// Empty reports whether the step asked for nothing.
func (b *Box) Empty() bool { return len(b.Sends) == 0 && len(b.Timers) == 0 }
