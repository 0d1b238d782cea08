package bufalloc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms Go
// runs Linux on that have them (x86-64, arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// adviseHuge asks the kernel to back the whole 2 MiB pages inside b with
// huge pages when they are first touched (MADV_HUGEPAGE; with the common
// transparent_hugepage=madvise setting nothing else gets them, and the Go
// runtime does not ask). The advice covers only b's own pages, never a
// neighbour's, and is a hint: an error (a kernel without THP) leaves b
// as it was.
func adviseHuge(b []byte) {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	first := (start + hugePage - 1) &^ (hugePage - 1)
	last := (start + uintptr(len(b))) &^ (hugePage - 1)
	if last <= first {
		return
	}
	_ = unix.Madvise(b[first-start:last-start], unix.MADV_HUGEPAGE)
}
