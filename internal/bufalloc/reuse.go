package bufalloc

import (
	"runtime"
	"runtime/metrics"
	"sync"
)

// ReuseMin is the size from which Make, before it takes new memory for a
// buffer that neither the reserve nor Keep can serve, first has the
// runtime collect if large buffers of at least that size were made since
// the last collection: some of them may be unreachable by now (a Get's
// copy the caller dropped, a deleted object's), and the allocation then
// reuses their memory, faulted in, rather than new memory.
//
// Why: a buffer larger than Keep's bound is freed to the heap, and an
// idle heap collects only once it has doubled. A program that Gets a
// 1 GiB object, drops it and Gets the next took new memory each time:
// the kernel faulted in and zeroed a GiB per Get, and on the testbed VM,
// whose huge pages it had to compact memory for, that took 2-2.3 s of a
// Get whose bytes moved in 0.25 s (bench routes, 1 GiB, 2026-11-28).
// A collection costs what the heap's pointers cost to trace, milliseconds
// against the tenths of a second a fresh GiB costs; below ReuseMin the
// faults cost too little for that trade.
const ReuseMin = 128 << 20

var reuse struct {
	mu sync.Mutex
	// cycles is the collections counted when fresh was last reset; fresh
	// the bytes of buffers of ReuseMin or more made from new memory since.
	cycles uint64
	fresh  int
	// collections counts the collections collectBeforeFresh ran (tests).
	collections int64
}

// collectBeforeFresh runs before Make takes n bytes of new memory for a
// large buffer, and collects first if that may let the allocation reuse
// memory (ReuseMin).
func collectBeforeFresh(n int) {
	if n < ReuseMin {
		return
	}
	c := gcCycles()
	reuse.mu.Lock()
	if c != reuse.cycles {
		reuse.cycles, reuse.fresh = c, 0
	}
	collect := reuse.fresh >= n
	reuse.fresh += n
	reuse.mu.Unlock()
	if !collect {
		return
	}
	runtime.GC()
	reuse.mu.Lock()
	reuse.cycles, reuse.fresh = gcCycles(), n
	reuse.collections++
	reuse.mu.Unlock()
}

var gcCyclesSample = []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
var gcCyclesMu sync.Mutex

// gcCycles is how many collections the runtime completed.
func gcCycles() uint64 {
	gcCyclesMu.Lock()
	defer gcCyclesMu.Unlock()
	metrics.Read(gcCyclesSample)
	return gcCyclesSample[0].Value.Uint64()
}
