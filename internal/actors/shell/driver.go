package shell

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// Driver runs any core in an actor: the per-protocol shell turns what
// the actor receives (a wire message, a timer's message coming back, a
// watched actor's end) into the core's event E and calls Step, which
// steps the core at the actor's now, carries out the output's Box with
// the Carrier and returns the output, whose own part (a fetch's end, a
// notice to deliver) is the only thing left for the shell. Declare one
// Driver per protocol, as a package variable: it holds no state.
type Driver[R any, E any, O outbox.Output] struct {
	Carrier[R]
	// Ended, if set, reports that r ended while the Box's sends went
	// out; Step then carries out nothing more of that Box.
	Ended func(R) bool
	// Now is the clock the core's time is read from (default
	// time.Now).
	Now func() time.Time
}

// Step steps core with ev for r at the Driver's now and carries out its
// Box. It reports false when r ended while the sends went out (Carry).
func (d *Driver[R, E, O]) Step(ctx actor.Context, r R, core outbox.Core[E, O], ev E) (O, bool) {
	now := time.Now
	if d.Now != nil {
		now = d.Now
	}
	return d.StepAt(ctx, r, core, now(), ev)
}

// StepAt is Step at a now the shell read once for several steps: the
// events one message turns into happen at the same time.
func (d *Driver[R, E, O]) StepAt(ctx actor.Context, r R, core outbox.Core[E, O], now time.Time, ev E) (O, bool) {
	o := core.Step(now, ev)
	return o, d.Carry(ctx, r, o.Outbox(), d.Ended)
}
