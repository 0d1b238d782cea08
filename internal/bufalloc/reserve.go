package bufalloc

import (
	"runtime"
	"sync"
	"time"
	"unsafe"
	"weak"
)

// Reserve makes a buffer of n bytes now, as Make would (huge pages if
// they were chosen), has the kernel fault in every page of it, and keeps
// it for the large buffers Make is asked for next: each of HugeMin bytes
// or more that fits in what is left is cut from it (at a huge page
// boundary). Once per process; a later call changes nothing and returns
// what the first did. A member calls it at its warm-up, after
// ChoosePages.
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
// The reserve is used again and again: once the garbage collector finds
// every piece cut from it unreachable (a finalizer on the allocation,
// which the reserve holds only weakly: no reader holds any piece), the
// whole of it serves the next large buffers again, its memory still
// faulted in. Buffers that do not fit in what is left are the heap's
// (and Keep holds them once they are freed). Why: an
// AllReduce of 8 x 32 MiB makes about 128 MiB of buffers per member
// each time; a reserve used once served the first and then went back to
// the heap all at once, whose scavenger handed it back to the kernel,
// and the second faulted up to 70,000 pages in (docs/benchmarks.md,
// "Kept memory"). A piece that lives long (an object the application
// keeps) holds the whole reserve until it goes; the ones after it are
// cut from what is left meanwhile.
//
// A ballast beside it (untouched address space that keeps the
// collector's heap goal up, so that the memory of deleted objects stays
// for the next ones) was tried and left out: it made every rep of a
// 32 MiB broadcast to 15 as cheap as the first, but the AllReduce
// dearer, whose tree outputs are garbage without a Delete and, with the
// goal up, piled into fresh memory (docs/benchmarks.md, "Warm memory").
//
// What it holds is bounded by n, held for the life of the process.
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
	huge := hugeChosen()
	size := allocSize(n, huge)
	raw := makeNoZero(size)[:size:size]
	b := bufferIn(raw, n, huge, true)
	t0 := time.Now()
	populate(b)
	warm.res = Reservation{Bytes: len(b), Took: time.Since(t0), Pages: Current()}
	warm.gen++
	warm.open(raw, n, huge, warm.gen)
	return warm.res
}

// Reservation is what Reserve made.
type Reservation struct {
	Bytes int           // 0: none
	Took  time.Duration // the faults' wall time
	Pages Pages         // the pages behind it
}

var warm reserve

// reserve is the process's reserve (Reserve), guarded by mu.
//
// Pieces are cut from the reserve's n bytes in order; nothing is given
// back piece by piece. Once a piece is cut, the reserve holds its
// allocation only weakly, so that the pieces are what keeps it alive:
// when the collector finds none of them reachable, the weak reference
// goes nil and the allocation's finalizer runs, which makes the whole
// reserve ready to be cut again, its memory still faulted in. Until
// then the pieces still in use hold it, and new pieces are cut from
// what is left after them.
type reserve struct {
	mu   sync.Mutex
	done bool
	res  Reservation
	// whole holds the reserve's n bytes (from a huge page boundary)
	// while no piece is cut from it: held weakly, an unused reserve would
	// be finalized and made ready again at every collection.
	whole []byte
	// held is the reserve's first byte, weakly, once a piece is cut.
	held weak.Pointer[byte]
	// next is how many of the n bytes the cuts took.
	next int
	// gen tells a finalizer of a reserve that a test dropped
	// (resetReserve) from the current one's.
	gen int
	// reopened counts how often the whole reserve was made ready again
	// (tests), and cuts the pieces ever cut from it (see collect).
	reopened, cuts int64
}

// open makes the whole reserve ready to be cut: raw is its allocation,
// of which n bytes are used, from raw's first huge page boundary if huge.
// The finalizer that opens it again is set here (a finalizer runs once).
// r.mu is held.
func (r *reserve) open(raw []byte, n int, huge bool, gen int) {
	r.whole, r.next = bufferIn(raw, n, huge, false), 0
	r.held = weak.Pointer[byte]{}
	size := len(raw)
	// The finalizer captures no reference to the allocation: it would
	// keep it reachable for good.
	runtime.SetFinalizer(&raw[0], func(p *byte) {
		warm.mu.Lock()
		defer warm.mu.Unlock()
		if warm.gen != gen {
			return // a test dropped this reserve: the collector frees it
		}
		warm.reopened++
		warm.open(unsafe.Slice(p, size), n, huge, gen)
	})
}

// rest is the part of the reserve no piece took yet: nil if none is
// left, or if the pieces are unreachable and the finalizer that makes
// the whole ready again has not run yet. r.mu is held.
func (r *reserve) rest() []byte {
	if r.whole != nil {
		return r.whole[r.next:]
	}
	p := r.held.Value()
	if p == nil {
		return nil
	}
	n := r.res.Bytes
	return unsafe.Slice(p, n)[r.next:n:n]
}

// takeReserved cuts n bytes from the reserve, or returns nil if what is
// ready is smaller. The next cut starts at the next huge page boundary,
// so that each buffer's whole huge pages are its own.
func takeReserved(n int) []byte {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	rest := warm.rest()
	if len(rest) < n {
		return nil
	}
	b := rest[:n:n]
	if warm.whole != nil {
		// From now on the pieces keep the allocation alive.
		warm.held = weak.Make(&warm.whole[0])
		warm.whole = nil
	}
	step := (n + hugePage - 1) &^ (hugePage - 1)
	warm.next = min(warm.next+step, warm.res.Bytes)
	warm.cuts++
	return b
}

// Reserved is how many bytes of the reserve are ready to be cut.
//
// It holds the pieces' allocation only for a nil check, not for the
// slicing rest does: a caller that polls it (a metrics scrape, a test)
// is a root of the allocation whenever a collection scans its goroutine
// there, and on a loaded machine a test polling it each millisecond kept
// the reserve cut through every follow-up collection.
func Reserved() int {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	r := &warm
	switch {
	case r.whole != nil:
		return len(r.whole) - r.next
	case r.res.Bytes == 0 || r.held.Value() == nil:
		return 0
	}
	return r.res.Bytes - r.next
}

// touch writes one byte of every 4 KiB page of b.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}
