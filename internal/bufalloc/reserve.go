package bufalloc

import (
	"sync"
	"time"
)

// Reserve makes a buffer of n bytes now, as Make would (huge pages if
// they were chosen), has the kernel fault in every page of it, and keeps
// it for the large buffers Make is asked for next: each of HugeMin bytes
// or more that fits in what is left is cut from it (at a huge page
// boundary), until it runs out. Once per process; a later call changes
// nothing and returns what the first did. A member calls it at its
// warm-up, after ChoosePages.
//
// Why: a new process's first large buffers are memory it never touched,
// and the kernel faults it in and zeroes it page by page under the first
// operations' receive copies. On a VM whose host backs memory at its
// first touch (the AMD EPYC testbed VM), that was 62 % of the members'
// CPU in a new cluster's first three 32 MiB broadcasts, and made the
// first repetitions at 16 members 1.13-1.40 times the rest
// (docs/benchmarks.md, "Quiet members"). Faulting the reserve in at
// warm-up moves that cost before the member reports ready.
//
// Beside it, Reserve holds a ballast of n more bytes for the process's
// life: address space the runtime counts as live heap, never touched, so
// with no memory behind it. It keeps the collector's heap goal, and with
// it the memory the runtime keeps rather than returns to the kernel, at
// least 2n above what the process holds: the memory of the large objects
// it deleted stays for the next ones. Without it, a member's heap goal
// was a few MiB once its objects were deleted, the runtime returned their
// memory to the kernel between two operations, and the next faulted it in
// again (the third 32 MiB broadcast at 16 members took 1.6-1.9 s of CPU,
// the others 1.0-1.2 s; docs/benchmarks.md, "Warm memory"). The price is
// collections up to 2n further apart for the process's other garbage.
//
// What it holds is bounded by 2n: pieces cut from the reserve keep all of
// it from the garbage collector until every piece is dropped, the
// untaken rest stays held until a buffer takes it, and the ballast is n
// bytes of address space.
func Reserve(n int) Reservation {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	if warm.done {
		return warm.res
	}
	warm.done = true
	if n < HugeMin {
		return warm.res
	}
	b := makeNoZero(n)[:n:n]
	if hugeChosen() {
		b = makeHuge(n)
	}
	t0 := time.Now()
	populate(b)
	warm.res = Reservation{Bytes: len(b), Took: time.Since(t0), Pages: Current()}
	warm.rest = b
	// Not zeroed, never written: the allocation of a fresh heap span is
	// address space until something touches it.
	warm.ballast = makeNoZero(n)
	return warm.res
}

// Reservation is what Reserve made.
type Reservation struct {
	Bytes int           // 0: none
	Took  time.Duration // the faults' wall time
	Pages Pages         // the pages behind it
}

var warm struct {
	mu      sync.Mutex
	done    bool
	res     Reservation
	rest    []byte // the untaken part, from a huge page boundary
	ballast []byte // never touched (see Reserve)
}

// takeReserved cuts n bytes from the reserve, or returns nil if what is
// left is smaller. The next cut starts at the next huge page boundary,
// so that each buffer's whole huge pages are its own.
func takeReserved(n int) []byte {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	if len(warm.rest) < n {
		return nil
	}
	b := warm.rest[:n:n]
	if step := (n + hugePage - 1) &^ (hugePage - 1); step < len(warm.rest) {
		warm.rest = warm.rest[step:]
	} else {
		warm.rest = nil
	}
	return b
}

// Reserved is how many bytes of the reserve no buffer took yet.
func Reserved() int {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	return len(warm.rest)
}

// touch writes one byte of every 4 KiB page of b.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
