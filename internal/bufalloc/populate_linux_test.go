package bufalloc

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestPopulateInChunks: the warm-up's faults are asked for a few huge
// pages at a time, every byte of the buffer once, so the kernel never
// holds the process's memory map for the whole reserve; a kernel that
// refuses MADV_POPULATE_WRITE gets the rest written instead.
func TestPopulateInChunks(t *testing.T) {
	defer func(f func([]byte, int) error) { madvise = f }(madvise)
	b := makeNoZero(10*populateChunk + 3*4096)
	var calls, covered int
	madvise = func(p []byte, advice int) error {
		if advice != unix.MADV_POPULATE_WRITE {
			t.Fatalf("advice %d, want MADV_POPULATE_WRITE", advice)
		}
		if len(p) > populateChunk {
			t.Fatalf("one call over %d bytes, want at most %d", len(p), populateChunk)
		}
		calls++
		covered += len(p)
		return unix.Madvise(p, advice)
	}
	populate(b)
	if calls != 11 || covered != len(b) {
		t.Fatalf("%d calls over %d bytes, want 11 over all %d", calls, covered, len(b))
	}
	// A kernel without it: the first refusal writes what is left.
	calls = 0
	madvise = func([]byte, int) error { calls++; return unix.EINVAL }
	c := makeNoZero(3 * populateChunk)
	for i := range c {
		c[i] = 1
	}
	populate(c)
	if calls != 1 {
		t.Fatalf("%d calls after a refusal, want 1", calls)
	}
	for i := 0; i < len(c); i += 4096 {
		if c[i] != 0 {
			t.Fatalf("byte %d not written after the refusal", i)
		}
	}
}
