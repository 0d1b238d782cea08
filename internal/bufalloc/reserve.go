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
// Only the first buffers come from it; once it is used up, Make
// allocates from the heap as before. A ballast beside it (untouched
// address space that keeps the collector's heap goal up, so that the
// memory of deleted objects stays for the next ones) was tried and left
// out: it made every rep of a 32 MiB broadcast to 15 as cheap as the
// first, but the AllReduce dearer, whose tree outputs are garbage
// without a Delete and, with the goal up, piled into fresh memory
// (docs/benchmarks.md, "Warm memory").
//
// What it holds is bounded by n: pieces cut from the reserve keep all of
// it from the garbage collector until every piece is dropped, and the
// untaken rest stays held until a buffer takes it.
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
	var b []byte
	if hugeChosen() {
		b = makeHuge(n)
	} else {
		b = makeNoZero(n)[:n:n]
	}
	t0 := time.Now()
	populate(b)
	warm.res = Reservation{Bytes: len(b), Took: time.Since(t0), Pages: Current()}
	warm.rest = b
	return warm.res
}

// Reservation is what Reserve made.
type Reservation struct {
	Bytes int           // 0: none
	Took  time.Duration // the faults' wall time
	Pages Pages         // the pages behind it
}

var warm struct {
	mu   sync.Mutex
	done bool
	res  Reservation
	rest []byte // the untaken part, from a huge page boundary
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
