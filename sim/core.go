package sim

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// driver is the simulator's one adapter to a core, the actor shell's
// shell.Driver in virtual time: step steps a core at the simulation's
// now and carries out its Box in the shell's order, the sends through
// send (what a core's address means here: a host, a shard, a caller),
// then the timers through timer, which schedules the timer's message
// back into the same Step. W is the simulation (the world, or the
// membership's), C what it runs the core for (a host, a fetch, a
// Reduce), as the shell's R. Declare one per core; it holds no state.
type driver[W clock, C any, E any, O outbox.Output] struct {
	send  func(w W, c C, s outbox.Send)
	timer func(w W, c C, t outbox.Timer)
}

// clock is what a driver reads a simulation's time from.
type clock interface{ now() time.Time }

// step steps core with ev for c and carries out its Box.
func (d *driver[W, C, E, O]) step(w W, c C, core outbox.Core[E, O], ev E) O {
	o := core.Step(w.now(), ev)
	b := o.Outbox()
	for _, s := range b.Sends {
		d.send(w, c, s)
	}
	if d.timer != nil {
		for _, t := range b.Timers {
			d.timer(w, c, t)
		}
	}
	return o
}
