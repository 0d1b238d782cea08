package bufalloc

import (
	"errors"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugePage is the size of a transparent huge page on the platforms Go
// runs Linux on that have them (x86-64, arm64 with 4 KiB base pages).
const hugePage = 2 << 20

// alignOffset is how far into b its first huge page boundary is.
func alignOffset(b []byte) int {
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return int(((start + hugePage - 1) &^ (hugePage - 1)) - start)
}

// adviseHuge asks the kernel to back the whole 2 MiB pages inside b with
// huge pages when they are first touched (MADV_HUGEPAGE; with the common
// transparent_hugepage=madvise setting nothing else gets them, and the Go
// runtime does not ask). The advice covers only b's own pages, never a
// neighbour's, and is a hint: an error leaves b as it was.
func adviseHuge(b []byte) {
	first := alignOffset(b)
	last := first + (len(b)-first)&^(hugePage-1)
	if last <= first {
		return
	}
	advised.Add(1)
	_ = unix.Madvise(b[first:last], unix.MADV_HUGEPAGE)
}

// advised counts adviseHuge's madvise calls (tests: the flags of the
// mapping that holds a small buffer tell nothing, since the heap may
// place it in memory a large buffer had advised before).
var advised atomic.Int64

// thpEnabled is the kernel's transparent huge page setting.
const thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"

// measureFirstTouch maps fresh anonymous memory of n bytes (outside the
// Go heap), touches one byte of every 4 KiB page, and returns the
// cheapest of rounds measurements of the thread's CPU for that, with
// 4 KiB pages and with huge pages asked for. Thread CPU, not wall time:
// a preemption while it runs does not count.
func measureFirstTouch(n, rounds int) (small, huge time.Duration, err error) {
	setting, err := os.ReadFile(thpEnabled)
	if err != nil {
		return 0, 0, err
	}
	if strings.Contains(string(setting), "[never]") {
		return 0, 0, errors.New("transparent huge pages are off ([never] in " + thpEnabled + ")")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for r := 0; r < rounds; r++ {
		for _, h := range []bool{false, true} {
			d, err := touchFresh(n, h)
			if err != nil {
				return 0, 0, err
			}
			if h && (huge == 0 || d < huge) {
				huge = d
			}
			if !h && (small == 0 || d < small) {
				small = d
			}
		}
	}
	return small, huge, nil
}

// touchFresh is one measurement of measureFirstTouch: n bytes at a
// huge page boundary, so both kinds cover the same whole huge pages.
func touchFresh(n int, huge bool) (time.Duration, error) {
	m, err := unix.Mmap(-1, 0, n+hugePage, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	off := alignOffset(m)
	b := m[off : off+n]
	if huge {
		if err := unix.Madvise(b, unix.MADV_HUGEPAGE); err != nil {
			return 0, err
		}
	} else {
		// A kernel set to "always" would back even these with huge
		// pages; the other kind is what is measured here.
		_ = unix.Madvise(b, unix.MADV_NOHUGEPAGE)
	}
	var t0, t1 unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t0); err != nil {
		return 0, err
	}
	touch(b)
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &t1); err != nil {
		return 0, err
	}
	return time.Duration(t1.Nano() - t0.Nano()), nil
}
