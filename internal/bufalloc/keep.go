package bufalloc

import (
	"runtime"
	"sync"
	"unsafe"
)

// Keep has the large buffers that nothing references any more kept,
// their memory faulted in, for the next ones Make is asked for, up to n
// bytes; 0 (the default) keeps none. A member sets it at its warm-up to
// its warm memory. The last call wins; a smaller bound drops what no
// longer fits.
//
// Why: the Go runtime gives the memory of freed buffers back to the
// kernel within seconds of idleness (its scavenger, MADV_DONTNEED), and
// keeps no more than about twice the live heap anyway. A member whose
// operations come with pauses between them, as an application's do,
// faulted its next 32 MiB object's memory in afresh each time: 2,700 to
// 8,000 faults per 32 MiB on the EPYC testbed VM, where a fault of a
// 4 KiB page costs about 6 µs and the kernel zeroes every page. A store
// cannot hand a deleted object's buffer to the next object itself: a
// reader may still hold it (GetReadOnly). The garbage collector knows
// when none does: every large buffer Make allocates carries a finalizer,
// which the collector runs once the buffer is unreachable, and the
// finalizer puts the buffer here instead of letting the heap free it.
// Released's collections after a Delete make that prompt.
//
// What it holds is live heap to the collector: its heap goal counts it,
// as it counts any memory a program holds.
func Keep(n int) {
	keep.mu.Lock()
	defer keep.mu.Unlock()
	keep.limit = max(n, 0)
	for size, bases := range keep.free {
		for len(bases) > 0 && keep.held > keep.limit {
			bases[len(bases)-1] = nil // the backing array would keep it alive
			bases = bases[:len(bases)-1]
			keep.held -= size
		}
		keep.free[size] = bases
	}
}

// Kept is how many bytes of buffers Keep holds now.
func Kept() int {
	keep.mu.Lock()
	defer keep.mu.Unlock()
	return keep.held
}

var keep struct {
	mu    sync.Mutex
	limit int
	held  int
	// free holds the kept allocations' first bytes by their sizes
	// (allocSize): a pointer keeps the allocation alive.
	free map[int][]*byte
	// kept and refused count the finalizer's runs that kept a buffer and
	// that found no room; reused, the buffers Make handed out again
	// (tests).
	kept, refused, reused int64
}

// keepStep is the size step of the allocations that Keep can reuse: a
// buffer is allocated at its size rounded up to it, so that objects of
// nearly the same size share one. The rounding is address space, not
// memory: nothing touches a buffer past its length.
const keepStep = hugePage

// allocSize is the size of the allocation that holds a large buffer of
// n bytes: n rounded up to keepStep, and one huge page more to align it
// when huge pages were chosen (makeHuge).
func allocSize(n int, huge bool) int {
	size := (n + keepStep - 1) &^ (keepStep - 1)
	if huge {
		size += hugePage
	}
	return size
}

// keeping reports whether Keep holds any buffers at all.
func keeping() bool {
	keep.mu.Lock()
	defer keep.mu.Unlock()
	return keep.limit > 0
}

// makeKept returns a buffer of n bytes (n ≥ HugeMin) from a kept
// allocation or a new one that Keep will take back once unreachable.
func makeKept(n int) []byte {
	huge := hugeChosen()
	size := allocSize(n, huge)
	keep.mu.Lock()
	var base *byte
	if bases := keep.free[size]; len(bases) > 0 {
		base = bases[len(bases)-1]
		bases[len(bases)-1] = nil
		keep.free[size] = bases[:len(bases)-1]
		keep.held -= size
		keep.reused++
	}
	keep.mu.Unlock()
	var raw []byte
	if base != nil {
		raw = unsafe.Slice(base, size)
	} else {
		raw = makeNoZero(size)[:size:size]
	}
	b := bufferIn(raw, n, huge, base == nil)
	// The finalizer captures the size only: a reference to the buffer
	// would keep it reachable for good.
	runtime.SetFinalizer(&raw[0], func(p *byte) { keepFreed(p, size) })
	return b
}

// keepFreed runs on the runtime's finalizer goroutine once nothing
// references the allocation at p: Keep takes it while it has room,
// which keeps it alive; otherwise it is left for the collector.
func keepFreed(p *byte, size int) {
	keep.mu.Lock()
	defer keep.mu.Unlock()
	if keep.held+size > keep.limit {
		keep.refused++
		return
	}
	if keep.free == nil {
		keep.free = map[int][]*byte{}
	}
	keep.free[size] = append(keep.free[size], p)
	keep.held += size
	keep.kept++
}
