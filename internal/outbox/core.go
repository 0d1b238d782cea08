package outbox

import "time"

// Output is what every core's step returns: a struct that embeds the
// Box beside what is the core's own. Embedding is what makes a type an
// Output: the Box's Outbox method is promoted to it.
type Output interface {
	Outbox() Box
}

// Outbox returns the Box itself; embedded in a core's output it hands
// a driver the part every core shares.
func (b Box) Outbox() Box { return b }

// Core is the one contract of every pure core: Step takes the time as a
// value and one event of the core's own event type, and returns the
// core's own output, whose Box holds every send, timer, watch and event
// the step asks for. A timer's message comes back to the same Step as
// an event when its time comes, so a core has no second way in.
//
// A driver (the generic actor shell, the simulator) knows only this:
// it turns what arrives into an E, steps the core, carries out the Box
// and hands the rest of O to the one piece of code that knows the core.
type Core[E any, O Output] interface {
	Step(now time.Time, ev E) O
}
