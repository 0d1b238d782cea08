package bufalloc

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the 4 KiB pages of b (which starts on a page
// boundary) that are in memory.
func residentPages(t *testing.T, b []byte) int {
	t.Helper()
	vec := make([]byte, (len(b)+4095)/4096)
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// populate leaves every page of the buffer resident.
func TestPopulateFaultsEveryPageIn(t *testing.T) {
	b := makeHuge(8 << 20) // starts on a huge page boundary
	populate(b)
	if got := residentPages(t, b); got != len(b)/4096 {
		t.Fatalf("%d of %d pages resident after populate", got, len(b)/4096)
	}
}
