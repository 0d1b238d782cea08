package actorutil

import (
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Dispatcher runs Hoplite's actors' mailboxes on pooled worker
// goroutines: Schedule hands a run to an idle worker when one is parked,
// and starts a worker otherwise (Proto.Actor's default dispatcher starts
// a goroutine per run). A fresh goroutine starts on the smallest stack,
// and a mailbox run deep enough to decode a protobuf message or run a
// store's allocation grows it, copying it each time: runtime.newstack
// was a third of the CPU of an inline Get in one process. A worker keeps
// its grown stack for the next run. Workers park at most workerIdle, and
// at most maxIdleWorkers of them at once: the pool never outgrows the
// runs in flight. BenchmarkInlineGetRemoteShard (cluster), 5 alternating
// runs, a goroutine per run -> the pool: CPU per Get 45.0 -> 34.4 us,
// p50 25.9 -> 16.5 us (medians).
var Dispatcher actor.Dispatcher = workerPool{}

// Props are the props of one of Hoplite's actors: producer's actor, run
// by Dispatcher (opts come after, and may set another dispatcher).
func Props(producer actor.Producer, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromProducer(producer, withDispatcher(opts)...)
}

// PropsFromFunc is Props for an actor that is a function.
func PropsFromFunc(f actor.ReceiveFunc, opts ...actor.PropsOption) *actor.Props {
	return actor.PropsFromFunc(f, withDispatcher(opts)...)
}

func withDispatcher(opts []actor.PropsOption) []actor.PropsOption {
	return append([]actor.PropsOption{actor.WithDispatcher(Dispatcher)}, opts...)
}

// workerPool is Dispatcher. Its throughput is Proto.Actor's default
// dispatcher's: messages a mailbox run takes before it yields.
type workerPool struct{}

// Schedule implements actor.Dispatcher.
func (workerPool) Schedule(fn func()) {
	select {
	case idleWork <- fn:
	default:
		go runWorker(fn)
	}
}

// Throughput implements actor.Dispatcher.
func (workerPool) Throughput() int { return 300 }

// idleWork is unbuffered: a send succeeds only to a parked worker.
var idleWork = make(chan func())

// idleWorkers counts the parked workers.
var idleWorkers atomic.Int32

const (
	workerIdle     = time.Second
	maxIdleWorkers = 64
)

// runWorker runs fn and then whatever Schedule hands it. (With the timer
// semantics before Go 1.23, which a main module whose go line is older
// selects, a stale expiry can end a worker early: that only costs the
// pool a worker.)
func runWorker(fn func()) {
	var t *time.Timer
	for {
		fn()
		if idleWorkers.Add(1) > maxIdleWorkers {
			idleWorkers.Add(-1)
			return
		}
		if t == nil {
			t = time.NewTimer(workerIdle)
		} else {
			t.Reset(workerIdle)
		}
		select {
		case fn = <-idleWork:
			idleWorkers.Add(-1)
			t.Stop()
		case <-t.C:
			idleWorkers.Add(-1)
			return
		}
	}
}
