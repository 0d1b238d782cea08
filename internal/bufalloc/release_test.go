package bufalloc

import (
	"runtime"
	"testing"
	"time"
)

// A large buffer let go is collected without waiting for the heap to
// grow to its next goal: its memory is free again for the next one.
func TestReleasedCollectsLargeBuffers(t *testing.T) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	runs, _ := collections()

	Released(HugeMin - 1) // small: nothing
	time.Sleep(10 * collectGap)
	if got, _ := collections(); got != runs {
		t.Fatalf("a buffer under HugeMin started %d collections", got-runs)
	}

	b := Make(32 << 20)
	b[0] = 1
	b = nil
	Released(32 << 20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.ReadMemStats(&ms)
		if got, _ := collections(); ms.NumGC > before && got > runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no collection after a 32 MiB buffer was let go (NumGC %d, was %d)", ms.NumGC, before)
		}
		time.Sleep(time.Millisecond)
	}
	_ = b
}

// Many buffers let go at once make a few collections, not one each.
func TestReleasedCollectsAtMostOncePerGap(t *testing.T) {
	runs, _ := collections()
	start := time.Now()
	for range 1000 {
		Released(HugeMin)
	}
	took := time.Since(start) // the time over which they came
	var n int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, running := collections()
		if got > runs && !running {
			n = got - runs
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the collector did not finish")
		}
		time.Sleep(collectGap)
	}
	// One for the first, one per gap while they came, and one for those
	// that came during the last.
	if max := int64(took/collectGap) + 2; n < 1 || n > max {
		t.Fatalf("%d collections for 1000 buffers let go within %v, want 1..%d", n, took, max)
	}
}
