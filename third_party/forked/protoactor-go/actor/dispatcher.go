package actor

import (
	"sync/atomic"
	"time"
)

type Dispatcher interface {
	Schedule(fn func())
	Throughput() int
}

type goroutineDispatcher int

var _ Dispatcher = goroutineDispatcher(0)

// Hoplite patch: Schedule hands fn to an idle worker goroutine when one
// is parked, and starts a worker otherwise (upstream: go fn()). A fresh
// goroutine starts on the smallest stack, and a mailbox run deep enough
// to decode a protobuf message or run a store's allocation grows it,
// copying it each time (runtime.newstack was a third of the CPU of an
// inline Get in one process). A worker keeps its grown stack for the
// next run. Workers park at most workerIdle, and at most maxIdleWorkers
// of them at once: the pool never outgrows the runs in flight.
func (goroutineDispatcher) Schedule(fn func()) {
	select {
	case idleWork <- fn:
	default:
		go runWorker(fn)
	}
}

// idleWork is unbuffered: a send succeeds only to a parked worker.
var idleWork = make(chan func())

// idleWorkers counts the parked workers.
var idleWorkers atomic.Int32

const (
	workerIdle     = time.Second
	maxIdleWorkers = 64
)

// runWorker runs fn and then whatever Schedule hands it. (With the
// timer semantics before Go 1.23, which this module's go line selects
// when it is the main module, a stale expiry can end a worker early:
// that only costs the pool a worker.)
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

func (d goroutineDispatcher) Throughput() int {
	return int(d)
}

func NewDefaultDispatcher(throughput int) Dispatcher {
	return goroutineDispatcher(throughput)
}

type synchronizedDispatcher int

var _ Dispatcher = synchronizedDispatcher(0)

func (synchronizedDispatcher) Schedule(fn func()) {
	fn()
}

func (d synchronizedDispatcher) Throughput() int {
	return int(d)
}

func NewSynchronizedDispatcher(throughput int) Dispatcher {
	return synchronizedDispatcher(throughput)
}
