// Package outbox is what a pure protocol step hands its actor shell: the
// messages to send, the timers to arm, the nodes to watch and the events
// to publish. Every pure core (the location table, the Reduction, the
// fetch and put protocols, the revoke broadcaster, the barrier replica)
// returns a Box, so every shell drains them the same way and a
// simulation can deliver them instead.
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

// Box is the one output every core's step returns, embedded in the
// step's result beside what is the core's own (a Reduce's reply, a
// fetch's end, a replica's takeover): the messages to send, the timers to
// arm, the nodes to watch or stop watching, and the events to publish, in
// order. A shell carries out a Box the same way whichever core made it,
// and a simulation delivers it instead.
type Box struct {
	Sends  []Send
	Timers []Timer
	// Watch names whom the shell must watch and report the failure of
	// back to the core; Unwatch whom it no longer needs to. Each is an
	// address in the core's terms, as Send.To.
	Watch, Unwatch []any
	// Events are notices for the shell's event stream or its log.
	Events []any
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

// WatchFor asks the shell to watch who (nil: nobody).
func (b *Box) WatchFor(who any) {
	if who != nil {
		b.Watch = append(b.Watch, who)
	}
}

// UnwatchFor tells the shell that who need no longer be watched (nil:
// nobody).
func (b *Box) UnwatchFor(who any) {
	if who != nil {
		b.Unwatch = append(b.Unwatch, who)
	}
}

// Emit appends an event.
func (b *Box) Emit(event any) {
	if event != nil {
		b.Events = append(b.Events, event)
	}
}

// Merge appends another step's output after this one's.
func (b *Box) Merge(o Box) {
	b.Sends = append(b.Sends, o.Sends...)
	b.Timers = append(b.Timers, o.Timers...)
	b.Watch = append(b.Watch, o.Watch...)
	b.Unwatch = append(b.Unwatch, o.Unwatch...)
	b.Events = append(b.Events, o.Events...)
}

// Empty reports whether the step asked for nothing.
func (b *Box) Empty() bool {
	return len(b.Sends) == 0 && len(b.Timers) == 0 && len(b.Watch) == 0 && len(b.Unwatch) == 0 && len(b.Events) == 0
}

// SendsTo is the sends of out addressed to to, in order: what a core
// answered one requester (tests and shells read a step's answer so).
func SendsTo(out []Send, to any) []Send {
	var r []Send
	for _, s := range out {
		if s.To == to {
			r = append(r, s)
		}
	}
	return r
}
