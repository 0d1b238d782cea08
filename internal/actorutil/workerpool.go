package actorutil

import (
	"context"
	"sync"
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
// p50 25.9 -> 16.5 us (medians). Once WarmWorkers has run (a member's
// warm-up), KeptWorkers of them stay parked however long the pool is
// idle: an application's operations come between other work, and after
// a pause longer than workerIdle every run of its next operation would
// start on a fresh goroutine again.
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
	// workerIdle is how long a worker beyond the kept ones stays parked.
	workerIdle     = time.Second
	maxIdleWorkers = 64
	// KeptWorkers is the pool's floor once WarmWorkers has run: parked
	// workers that never leave. A small Get runs on two on its member
	// (the store node's mailbox and its Locate's call) and one at its
	// shard's.
	KeptWorkers = 8
	// warmStack is what WarmWorkers grows each kept worker's stack to,
	// so that a run as deep as a Locate's call and its decoding does not
	// copy the stack as it grows.
	warmStack = 32 << 10
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
			if !leaveIdle() {
				fn = <-idleWork // one of the kept: park until there is work
				idleWorkers.Add(-1)
				continue
			}
			return
		}
	}
}

// kept is the pool's floor of parked workers: KeptWorkers once
// WarmWorkers has run, 0 before.
var kept atomic.Int32

// KeptFloor is how many parked workers the pool keeps however long it
// is idle: KeptWorkers once WarmWorkers has run, 0 before.
func KeptFloor() int { return int(kept.Load()) }

// leaveIdle takes a parked worker off the count, unless that would leave
// fewer than kept parked; it reports whether it did.
func leaveIdle() bool {
	for {
		n := idleWorkers.Load()
		if n <= kept.Load() {
			return false
		}
		if idleWorkers.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

var warmWorkersOnce sync.Once

// WarmWorkers starts the pool's kept workers (once per process), each
// with its stack grown to warmStack, and returns when they are parked
// or, at the latest, when ctx ends. A worker's first runs would
// otherwise grow a fresh stack by copying it, a frame at a time, which
// made a new cluster's first small Gets several times slower than its
// later ones (docs/benchmarks.md).
func WarmWorkers(ctx context.Context) {
	warmWorkersOnce.Do(startKept)
	for idleWorkers.Load() < KeptWorkers && ctx.Err() == nil {
		time.Sleep(time.Millisecond) // they park as soon as they are released
	}
}

// startKept runs KeptWorkers functions that grow their stacks, all at
// once, so that each runs on a worker of its own rather than after
// another on one, and sets the pool's floor before they park.
func startKept() {
	var started sync.WaitGroup
	release := make(chan struct{})
	for range KeptWorkers {
		started.Add(1)
		Dispatcher.Schedule(func() {
			growStack()
			started.Done()
			<-release
		})
	}
	started.Wait()
	kept.Store(KeptWorkers)
	close(release)
}

// growStack grows the calling goroutine's stack to about warmStack: the
// runtime doubles a stack that overflows and keeps it at that size while
// the goroutine runs and until a collection finds it mostly unused.
//
//go:noinline
func growStack() byte {
	var frame [warmStack * 5 / 8]byte
	frame[len(frame)-1] = 1
	return frame[stackIndex.Load()%uint32(len(frame))]
}

// stackIndex keeps growStack's frame from being optimised away.
var stackIndex atomic.Uint32
