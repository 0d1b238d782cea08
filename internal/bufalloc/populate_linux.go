package bufalloc

import "golang.org/x/sys/unix"

// populate faults in every page of b: MADV_POPULATE_WRITE (Linux 5.14)
// has the kernel do it without a write per page from here (which under
// the race detector would also fault in b's shadow), and a kernel
// without it gets the writes.
func populate(b []byte) {
	if len(b) == 0 {
		return
	}
	if unix.Madvise(b, unix.MADV_POPULATE_WRITE) == nil {
		return
	}
	touch(b)
}
