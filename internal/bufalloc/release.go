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
// as soon as nothing else holds them; if it leaves a piece of the
// reserve cut, up to len(recollectAfter) more follow.
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
	_, cuts := reserveState() // before collector.mu: the reserve has a lock of its own
	collector.mu.Lock()
	collector.pending = true
	collector.cutsAt = cuts
	start := !collector.running
	collector.running = true
	collector.mu.Unlock()
	if start {
		go collect()
		return
	}
	select {
	case collector.wake <- struct{}{}: // a follow-up's pause ends now
	default:
	}
}

// collectGap bounds how often Released makes the runtime collect: a
// program that deletes objects of many MiB in a loop gets a collection
// per collectGap, not one per object.
const collectGap = 20 * time.Millisecond

// recollectAfter are the pauses before the follow-up collections of a
// Released whose collections left pieces of the reserve (Reserve) cut.
// A piece let go may still be held for a moment when its collection
// comes (a reader finishing, an answer on its way), and an idle process
// may then collect nothing for minutes: its next large buffers would be
// new memory, which costs the kernel a fault per page. A test of three
// `hoplite node` members found the reserve still cut 10 s after the
// last Delete in 1 run of 4 (TestProcessWarmMemory). The follow-ups
// stop once the reserve is whole, once a new piece is cut from it (that
// piece holds it until its own release), and after the last pause: a
// piece that an object the application keeps holds needs no more. The
// first comes after a second, not sooner: back-to-back large AllReduces
// cut a new piece within the second anyway, and earlier follow-ups only
// cost them CPU (docs/benchmarks.md).
var recollectAfter = []time.Duration{time.Second, 4 * time.Second}

var collector struct {
	mu        sync.Mutex
	running   bool // a collect goroutine is on
	pending   bool // buffers were let go since its last collection began
	runs      int64
	followUps int64 // collections after the pauses of recollectAfter
	cutsAt    int64 // the reserve's cuts at the last Released
	// wake ends a follow-up's pause when buffers are let go meanwhile:
	// their collection comes now, not after the pause.
	wake chan struct{}
}

func init() { collector.wake = make(chan struct{}, 1) }

func collect() {
	followUps, cutsAt := 0, int64(0)
	for {
		collector.mu.Lock()
		if collector.pending {
			select {
			case <-collector.wake: // this collection is the one it asked for
			default:
			}
			collector.pending = false
			collector.runs++
			cutsAt = collector.cutsAt
			collector.mu.Unlock()
			followUps = 0
			runtime.GC()
			time.Sleep(collectGap) // also the reserve's finalizer's time
			continue
		}
		collector.mu.Unlock()
		// Outside collector.mu: the reserve has a lock of its own.
		settled := func() bool { whole, cuts := reserveState(); return whole || cuts != cutsAt }
		if followUps == len(recollectAfter) || settled() {
			collector.mu.Lock()
			if collector.pending {
				collector.mu.Unlock()
				continue
			}
			collector.running = false
			collector.mu.Unlock()
			return
		}
		pause := time.NewTimer(recollectAfter[followUps])
		select {
		case <-pause.C:
		case <-collector.wake:
			pause.Stop()
			continue // a release: its collection first
		}
		followUps++
		if settled() {
			continue
		}
		collector.mu.Lock()
		collector.followUps++
		collector.mu.Unlock()
		runtime.GC()
		time.Sleep(collectGap)
	}
}

// reserveState reports whether no piece of the reserve is cut (or there
// is no reserve), and how many pieces were ever cut from it.
func reserveState() (whole bool, cuts int64) {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	return warm.res.Bytes == 0 || warm.whole != nil, warm.cuts
}

// collections is how many collections Released started, and whether
// its goroutine is still on.
func collections() (runs int64, running bool) {
	collector.mu.Lock()
	defer collector.mu.Unlock()
	return collector.runs, collector.running
}
