// Package shell is the generic actor shell: it carries out what a core's
// step returns, the outbox.Box every core speaks, inside an actor. A
// per-protocol shell wires a Carrier to its core once (how the core's
// addresses resolve, the sends it routes itself, where a timer's message
// comes back, what an event becomes) and keeps only what is the core's
// own: the store operations of a fetch, a Put's copy-in, a Reduce's
// reply.
package shell

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// Carrier carries out Boxes in one actor. R is what the shell runs the
// core for (a fetch, a Put, a Delete): each hook gets it, so one Carrier,
// built once, serves every run without a closure per step. Nil hooks
// take the defaults.
type Carrier[R any] struct {
	// Resolve turns a core's address (a Send's To, a Watch) into the
	// actor it names; nil drops the send.
	Resolve func(to any) *actor.PID
	// Route, if set, is offered every send first; it reports true when it
	// carried the send out itself (a request whose answer the shell
	// waits for, a Locate through the node's Locator).
	Route func(ctx actor.Context, r R, s outbox.Send) bool
	// Watch watches who for r (default: ctx.Watch of what Resolve names).
	Watch func(ctx actor.Context, r R, who any)
	// Unwatch ends that watch (default: ctx.Unwatch of what Resolve
	// names).
	Unwatch func(ctx actor.Context, r R, who any)
	// Timer arms t for r (default: t.Msg back to the actor at t.At, on
	// its own timer).
	Timer func(ctx actor.Context, r R, t outbox.Timer)
	// Event takes an event (default: published on the actor system's
	// event stream).
	Event func(ctx actor.Context, r R, e any)
}

// Carry carries out b for r, in order: its sends, its timers, its
// watches and unwatches, its events. It reports false, having stopped,
// when ended says r ended while its sends went out (a send that found
// nobody to ask can end a run); ended may be nil.
func (c *Carrier[R]) Carry(ctx actor.Context, r R, b outbox.Box, ended func(R) bool) bool {
	for _, s := range b.Sends {
		if c.Route != nil && c.Route(ctx, r, s) {
			continue
		}
		if pid := c.resolve(s.To); pid != nil {
			ctx.Send(pid, s.Msg)
		}
	}
	if ended != nil && ended(r) {
		return false
	}
	for _, t := range b.Timers {
		if c.Timer != nil {
			c.Timer(ctx, r, t)
		} else {
			After(ctx, t.At, t.Msg)
		}
	}
	for _, w := range b.Unwatch {
		if c.Unwatch != nil {
			c.Unwatch(ctx, r, w)
		} else if pid := c.resolve(w); pid != nil {
			ctx.Unwatch(pid)
		}
	}
	for _, w := range b.Watch {
		if c.Watch != nil {
			c.Watch(ctx, r, w)
		} else if pid := c.resolve(w); pid != nil {
			ctx.Watch(pid)
		}
	}
	for _, e := range b.Events {
		if c.Event != nil {
			c.Event(ctx, r, e)
		} else {
			ctx.ActorSystem().EventStream.Publish(e)
		}
	}
	return true
}

func (c *Carrier[R]) resolve(to any) *actor.PID {
	if c.Resolve != nil {
		return c.Resolve(to)
	}
	pid, _ := to.(*actor.PID)
	return pid
}

// After sends msg to the actor at at. time.AfterFunc rather than
// Proto.Actor's scheduler (whose cancel races with its timer goroutine):
// no goroutine runs until it fires, and then only to send one message.
func After(ctx actor.Context, at time.Time, msg any) *time.Timer {
	system, self := ctx.ActorSystem(), ctx.Self()
	return time.AfterFunc(time.Until(at), func() { system.Root.Send(self, msg) })
}

// Timer is a core's one pending wait: arming it again stops the wait
// before (the core would ignore its message, which names an older
// step).
type Timer struct{ t *time.Timer }

// Arm sends msg to the actor at at, in place of the pending one.
func (t *Timer) Arm(ctx actor.Context, at time.Time, msg any) {
	t.Stop()
	t.t = After(ctx, at, msg)
}

// Func calls f at at, in place of the pending wait; f runs on the
// timer's goroutine, so it should only send. For a shell that builds the
// message only if the wait fires (most are stopped first).
func (t *Timer) Func(at time.Time, f func()) {
	t.Stop()
	t.t = time.AfterFunc(time.Until(at), f)
}

// Stop ends the pending wait, if any.
func (t *Timer) Stop() {
	if t.t != nil {
		t.t.Stop()
		t.t = nil
	}
}
