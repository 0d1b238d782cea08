// Package bufalloc makes the buffers that object bytes are received
// into without zeroing them: every byte is written before it is read, so
// zeroing would be one more pass over every byte a member receives. On
// the testbed the Go heap zeroed a receiver's reused 32 MiB buffer before
// the data plane wrote all of it once more.
//
// A large buffer's first touch is the other cost: the kernel faults its
// memory in page by page, and what a fault costs depends on the machine
// far more than on the code. Transparent huge pages (MADV_HUGEPAGE) cut
// the faults 512-fold, but whether that is cheaper is the machine's to
// say: on one 2-vCPU VM (Intel Xeon) a fresh process's huge pages cost
// about twice the CPU of 4 KiB ones, on another (AMD EPYC, a
// paravirtualized MMU) 4 KiB faults cost 100 ms per 32 MiB and huge
// pages a tenth of that. So the choice is measured, once per process
// (ChoosePages, at a member's warm-up), or forced (SetPages).
//
// The allocation without zeroing is the runtime's, reached by
// go:linkname. Should a Go release refuse that link, build with
// -tags hoplite_zeroed: buffers are then made (and zeroed) by make.
package bufalloc

// Make returns a slice of n bytes whose contents are unspecified: the
// caller writes every byte before anyone reads it. n must not be
// negative.
func Make(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	if n >= HugeMin {
		if b := takeReserved(n); b != nil {
			return b
		}
		if keeping() {
			return makeKept(n)
		}
		if hugeChosen() {
			return makeHuge(n)
		}
	}
	return makeNoZero(n)[:n:n]
}

// makeHuge makes n bytes that start on a huge page boundary and asks for
// huge pages for every whole one of them. The heap places a large
// allocation on any 8 KiB boundary, and a 4 MiB buffer (a sliced
// AllReduce's chain output at 32 MiB and 8 members) placed so holds one
// whole huge page, not two: half of it would fault in 4 KiB at a time.
// The allocation is a huge page larger than n to make room for the
// alignment; the part outside the buffer is never touched (the memory
// is not zeroed), so it costs address space and the heap's accounting,
// not memory.
func makeHuge(n int) []byte {
	return bufferIn(makeNoZero(n+hugePage), n, true, true)
}

// bufferIn is the buffer of n bytes in the allocation raw: its first n
// bytes, or with huge pages the n from raw's first huge page boundary
// (raw holds a huge page more than n), asking for huge pages behind them
// if advise (memory the advice was not given for yet).
func bufferIn(raw []byte, n int, huge, advise bool) []byte {
	if !huge {
		return raw[:n:n]
	}
	off := alignOffset(raw)
	b := raw[off : off+n : off+n]
	if advise {
		adviseHuge(b)
	}
	return b
}

// HugeMin is the size from which Make may ask for huge pages: below it
// a buffer spans too few whole 2 MiB pages for the advice to matter.
const HugeMin = 4 << 20
