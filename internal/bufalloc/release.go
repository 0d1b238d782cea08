package bufalloc

import (
	"runtime"
	"sync"
	"time"
)

// Released tells the allocator that the store let go of a buffer of n
// bytes from Make. Once buffers of HugeMin or more have been let go,
// a garbage collection runs in the background (one at a time, at least
// collectGap apart), so that the next large buffer reuses their memory
// as soon as nothing else holds them.
//
// Why: between two collections the heap grows by what is allocated, so
// a member that receives an object of 32 MiB for each operation and
// deletes it after took new memory for the next two or three before a
// collection freed the first ones. New memory costs the kernel a page
// fault and its zeroing per page, and on a VM whose host backs memory at
// its first touch those faults were 62 % of the members' CPU in a new
// cluster's first three 32 MiB broadcasts (docs/benchmarks.md, "Quiet
// members"). A collection costs what the heap's pointers cost to trace:
// object bytes hold none, so it stays small however much the store holds.
func Released(n int) {
	if n < HugeMin {
		return
	}
	collector.mu.Lock()
	collector.pending = true
	start := !collector.running
	collector.running = true
	collector.mu.Unlock()
	if start {
		go collect()
	}
}

// collectGap bounds how often Released makes the runtime collect: a
// program that deletes objects of many MiB in a loop gets a collection
// per collectGap, not one per object.
const collectGap = 20 * time.Millisecond

var collector struct {
	mu      sync.Mutex
	running bool // a collect goroutine is on
	pending bool // buffers were let go since its last collection began
	runs    int64
}

func collect() {
	for {
		collector.mu.Lock()
		if !collector.pending {
			collector.running = false
			collector.mu.Unlock()
			return
		}
		collector.pending = false
		collector.runs++
		collector.mu.Unlock()
		runtime.GC()
		time.Sleep(collectGap)
	}
}

// collections is how many collections Released started, and whether
// its goroutine is still on.
func collections() (runs int64, running bool) {
	collector.mu.Lock()
	defer collector.mu.Unlock()
	return collector.runs, collector.running
}
