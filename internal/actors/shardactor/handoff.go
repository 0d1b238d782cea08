package shardactor

import (
	"sync"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
)

// handoff is a shard's dispatcher: it runs the shard's mailbox on the
// pool's workers (actorutil.Dispatcher), except for a run that a
// LocateHere call's own Send scheduled while it was armed: that call
// runs it on its goroutine, which would otherwise park until a worker
// answered it. A small Get's Locate then costs its shard no hand-off to
// a worker and back (each a goroutine readied, and on an idle member a
// thread woken to run it): the shard's messages are still taken one at
// a time, in order, by the one run of its mailbox, only on the goroutine
// that waits for them. Its supervision is the mailbox's: a panic in the
// run is the actor's failure, escalated by the run itself.
type handoff struct {
	mu sync.Mutex
	// armed counts the LocateHere calls between their arm and disarm;
	// caught is a run scheduled meanwhile, which the first disarm runs.
	// A mailbox schedules one run until that run ends, so one is caught
	// at most; another goes to the pool.
	armed  int
	caught func()
}

// Schedule implements actor.Dispatcher.
func (h *handoff) Schedule(fn func()) {
	h.mu.Lock()
	if h.armed > 0 && h.caught == nil {
		h.caught = fn
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	actorutil.Dispatcher.Schedule(fn)
}

// Throughput implements actor.Dispatcher.
func (h *handoff) Throughput() int { return actorutil.Dispatcher.Throughput() }

// arm makes the runs scheduled until disarm the caller's to run.
func (h *handoff) arm() {
	h.mu.Lock()
	h.armed++
	h.mu.Unlock()
}

// disarm ends arm, and runs the mailbox run caught meanwhile, if any,
// on the caller's goroutine. A run caught while several calls are armed
// is taken by whichever disarms first: under mu, a run is caught only
// while some disarm is still to come.
func (h *handoff) disarm() {
	h.mu.Lock()
	h.armed--
	fn := h.caught
	h.caught = nil
	h.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// handoffs are the running shards' dispatchers, by actorutil.Key of
// their PIDs.
var handoffs sync.Map

// registerHandoff makes h the dispatcher LocateHere arms for pid.
func registerHandoff(pid *actor.PID, h *handoff) {
	if h != nil {
		handoffs.Store(actorutil.Key(pid), h)
	}
}

// unregisterHandoff withdraws it (the shard stops).
func unregisterHandoff(pid *actor.PID, h *handoff) {
	if h != nil {
		handoffs.CompareAndDelete(actorutil.Key(pid), h)
	}
}

// handoffOf is the dispatcher of the shard pid, or nil for a shard not
// started here.
func handoffOf(pid *actor.PID) *handoff {
	h, _ := handoffs.Load(actorutil.Key(pid))
	if h == nil {
		return nil
	}
	return h.(*handoff)
}
