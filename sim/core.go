package sim

import "github.com/hoplite-go/hoplite/internal/outbox"

// driver is the simulator's one adapter to a core, the actor shell's
// shell.Driver in virtual time: step steps a core at the world's now
// and carries out its Box in the shell's order, the sends through send
// (what a core's address means here: a host, a shard, a caller), then
// the timers through timer, which schedules the timer's message back
// into the same Step. C is what the simulator runs the core for (a
// host, a fetch, a Reduce), as the shell's R. Declare one per core; it
// holds no state.
type driver[C any, E any, O outbox.Output] struct {
	send  func(w *world, c C, s outbox.Send)
	timer func(w *world, c C, t outbox.Timer)
}

// step steps core with ev for c and carries out its Box.
func (d *driver[C, E, O]) step(w *world, c C, core outbox.Core[E, O], ev E) O {
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
