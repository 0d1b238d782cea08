//go:build linux

package bufalloc

import (
	"runtime"
	"syscall"
	"testing"
)

func minorFaults(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Minflt
}

// A large buffer made after one of its size was dropped reuses that
// one's memory, faulted in: the collection Make runs first frees it.
func TestMakeReusesTheMemoryOfALargeBufferDropped(t *testing.T) {
	quietHeap(t)
	const n = ReuseMin
	pages := int64(n / 4096)
	f0 := minorFaults(t)
	a := Make(n)
	touch(a)
	first := minorFaults(t) - f0
	at := addr(a)
	a = nil
	f1 := minorFaults(t)
	b := Make(n)
	touch(b)
	second := minorFaults(t) - f1
	runtime.KeepAlive(b)
	if addr(b) != at {
		t.Fatalf("the buffer after a dropped one of its size is at %#x, the dropped one was at %#x: its memory was not reused", addr(b), at)
	}
	if first < pages/2 {
		t.Fatalf("the first buffer faulted %d pages of %d: not new memory, the test shows nothing", first, pages)
	}
	// The race detector clears its shadow of freed memory and faults it
	// in again: there the address says it all.
	if !raceEnabled && second > pages/4 {
		t.Fatalf("the buffer after a dropped one faulted %d pages of %d (the first %d): its memory was not reused", second, pages, first)
	}
}
