// Package bufalloc makes the buffers that object bytes are received
// into: without zeroing them (every byte is written before it is read),
// and, for large ones on Linux, asking the kernel for transparent huge
// pages.
//
// On the testbed (8 members sharing 2 vCPUs) a 32 MiB broadcast to 7
// cost each receiver about 12.5 ms of CPU in page faults when its buffer
// was fresh memory (4 KiB pages, some 8,200 faults), and about as much
// again zeroing it when the Go heap reused memory, before the data plane
// wrote every byte of it once more. Huge pages make the faults about a
// sixteenth as many; skipping the zeroing removes one pass over the
// buffer.
package bufalloc

import _ "unsafe" // for go:linkname

// HugeMin is the size from which Make asks for huge pages: below it an
// object spans too few 2 MiB pages for the advice to matter.
const HugeMin = 4 << 20

// Make returns a slice of n bytes whose contents are unspecified: the
// caller writes every byte before anyone reads it. n must not be
// negative.
func Make(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	b := makeNoZero(n)[:n:n]
	if n >= HugeMin {
		adviseHuge(b)
	}
	return b
}

// makeNoZero is the runtime's allocation without zeroing that
// strings.Builder and bytes.Join use (internal/bytealg.MakeNoZero). A
// []byte holds no pointers, so the garbage collector never reads what
// the allocation left in it.
//
//go:linkname makeNoZero internal/bytealg.MakeNoZero
func makeNoZero(n int) []byte
