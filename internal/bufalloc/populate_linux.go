package bufalloc

import "golang.org/x/sys/unix"

// populateChunk is how much one madvise faults in. One call over the
// 128 MiB warm-up reserve, slowed by a loaded machine (64 members
// starting on two cores), stalled a whole member for 8–9 s: its log fell
// silent for the call and its etcd lease went unrenewed, so the others
// expelled it. The likely reason is the process's memory map lock, which
// the call holds while it faults and which the runtime's own mappings
// and the other threads' page faults then wait for. A few huge pages at
// a time let the others in between, and the stall went.
const populateChunk = 4 << 20

// madvise is unix.Madvise (a test counts the calls).
var madvise = unix.Madvise

// populate faults in every page of b: MADV_POPULATE_WRITE (Linux 5.14)
// has the kernel do it without a write per page from here (which under
// the race detector would also fault in b's shadow), and a kernel
// without it gets the writes.
func populate(b []byte) {
	for off := 0; off < len(b); off += populateChunk {
		end := min(off+populateChunk, len(b))
		if madvise(b[off:end], unix.MADV_POPULATE_WRITE) != nil {
			touch(b[off:])
			return
		}
	}
}
