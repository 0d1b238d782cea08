package bufalloc

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// quietHeap stops the runtime's own collections for a test, so that the
// only ones are those Make runs, and clears collectBeforeFresh's count.
func quietHeap(t *testing.T) {
	t.Helper()
	resetReserve()
	resetKeep()
	SetPages(PagesSmall)
	old := debug.SetGCPercent(-1)
	runtime.GC()
	reuse.mu.Lock()
	reuse.cycles, reuse.fresh, reuse.collections = gcCycles(), 0, 0
	reuse.mu.Unlock()
	t.Cleanup(func() {
		debug.SetGCPercent(old)
		resetKeep()
		SetPages(PagesUnchosen)
	})
}

func reuseCollections() int64 {
	reuse.mu.Lock()
	defer reuse.mu.Unlock()
	return reuse.collections
}

// Make collects before taking new memory for a buffer of ReuseMin or
// more only once buffers of at least its size were made since the last
// collection; smaller buffers, and a first large one, never wait for one.
func TestMakeCollectsBeforeNewMemoryOnlyAfterLargeBuffersWereMade(t *testing.T) {
	quietHeap(t)
	small := Make(ReuseMin / 2)
	small2 := Make(ReuseMin / 2)
	if got := reuseCollections(); got != 0 {
		t.Fatalf("%d collections for buffers under ReuseMin", got)
	}
	first := Make(ReuseMin)
	if got := reuseCollections(); got != 0 {
		t.Fatalf("%d collections before the first large buffer", got)
	}
	second := Make(ReuseMin)
	if got := reuseCollections(); got != 1 {
		t.Fatalf("%d collections before the second large buffer, want 1 (the first may be garbage)", got)
	}
	runtime.GC() // a collection of the program's own counts as well
	third := Make(ReuseMin)
	if got := reuseCollections(); got != 1 {
		t.Fatalf("%d collections after a collection the program ran, want still 1", got)
	}
	// A buffer Keep can hold is Keep's: no collection for it.
	Keep(allocSize(2*ReuseMin, false))
	kept, kept2 := Make(2*ReuseMin), Make(2*ReuseMin)
	if got := reuseCollections(); got != 1 {
		t.Fatalf("%d collections for buffers Keep holds, want still 1", got)
	}
	runtime.KeepAlive(small)
	runtime.KeepAlive(small2)
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
	runtime.KeepAlive(third)
	runtime.KeepAlive(kept)
	runtime.KeepAlive(kept2)
}

// A large buffer that Keep cannot hold carries no finalizer: one
// collection frees it.
func TestMakeLeavesBuffersBeyondKeepsBoundToTheHeap(t *testing.T) {
	quietHeap(t)
	Keep(HugeMin * 4)
	n := ReuseMin
	b := Make(n)
	freed := make(chan struct{})
	// A cleanup runs whether or not the allocation has a finalizer; a
	// finalizer of Keep's would resurrect it for a cycle and the cleanup
	// would wait for a second collection.
	runtime.AddCleanup(&b[0], func(ch chan struct{}) { close(ch) }, freed)
	b = nil
	runtime.GC() // one: a second would free a resurrected one too
	select {
	case <-freed:
	case <-time.After(5 * time.Second):
		t.Fatal("a buffer beyond Keep's bound not freed 5 s after the collection that found it unreachable")
	}
	keep.mu.Lock()
	refused := keep.refused
	keep.mu.Unlock()
	if refused != 0 {
		t.Fatalf("Keep's finalizer ran on a buffer beyond its bound (%d refusals)", refused)
	}
}
