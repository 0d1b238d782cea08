package bufalloc

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// resetKeep empties the keep and turns it off (tests only). Buffers an
// earlier test dropped may still be kept after it (their finalizers run
// when the collector gets to them), so each test uses size classes of
// its own.
func resetKeep() {
	Keep(0)
	// Run the finalizers of what earlier tests dropped (refused now): a
	// sentinel's finalizer has run after the collections that queued
	// theirs.
	for range 3 {
		done := make(chan struct{})
		sentinel := new([64]byte)
		runtime.SetFinalizer(sentinel, func(*[64]byte) { close(done) })
		sentinel = nil
		runtime.GC()
		select {
		case <-done:
		case <-time.After(time.Second):
		}
	}
	keep.mu.Lock()
	defer keep.mu.Unlock()
	keep.free, keep.kept, keep.refused, keep.reused = nil, 0, 0, 0
}

// collectUntil runs collections until cond holds (finalizers run on a
// goroutine of their own, after the collection that found their objects
// unreachable), failing after a few seconds.
func collectUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not after 5 s of collections (kept %d bytes)", what, Kept())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// keptAt reports whether the keep holds the allocation of size whose
// buffer starts at a (huge: aligned in it).
func keptAt(size int, a uintptr, huge bool) bool {
	keep.mu.Lock()
	defer keep.mu.Unlock()
	for _, p := range keep.free[size] {
		raw := unsafe.Slice(p, size)
		off := 0
		if huge {
			off = alignOffset(raw)
		}
		if uintptr(unsafe.Pointer(p))+uintptr(off) == a {
			return true
		}
	}
	return false
}

// A large buffer that nothing references any more is kept, and the next
// large buffer of its size class is made in its memory; a buffer of
// another class is not.
func TestKeepReusesAnUnreachableBuffer(t *testing.T) {
	for _, p := range []Pages{PagesSmall, PagesHuge} {
		t.Run(p.String(), func(t *testing.T) {
			resetReserve()
			resetKeep()
			SetPages(p)
			t.Cleanup(func() { resetKeep(); SetPages(PagesUnchosen) })
			Keep(64 << 20)

			const n = 8<<20 - 123
			b := Make(n)
			if len(b) != n || cap(b) != n {
				t.Fatalf("len/cap %d/%d, want %d", len(b), cap(b), n)
			}
			if p == PagesHuge && addr(b)%hugePage != 0 {
				t.Fatalf("a buffer on huge pages starts %d bytes past a huge page boundary", addr(b)%hugePage)
			}
			first := addr(b)
			b[0], b[n-1] = 1, 2
			b = nil
			size := allocSize(n, p == PagesHuge)
			collectUntil(t, "the dropped buffer kept", func() bool { return keptAt(size, first, p == PagesHuge) })
			held := Kept()

			other := Make(16 << 20) // another class: new memory
			if addr(other) == first {
				t.Fatal("a buffer of 16 MiB was made in a kept allocation of 8 MiB")
			}
			again := Make(n - 1000) // the same class
			if got := addr(again); got != first {
				t.Fatalf("the next buffer of the class starts at %#x, want the kept one's %#x", got, first)
			}
			if Kept() != held-size || keep.reused != 1 {
				t.Fatalf("kept %d bytes, reused %d, want %d and 1", Kept(), keep.reused, held-size)
			}
			runtime.KeepAlive(other)
			runtime.KeepAlive(again)
		})
	}
}

// A buffer some slice of which is still referenced is not kept, and the
// keep holds no more than its bound: what does not fit is left to the
// collector.
func TestKeepHoldsOnlyUnreachableBuffersWithinItsBound(t *testing.T) {
	resetReserve()
	resetKeep()
	SetPages(PagesSmall)
	t.Cleanup(func() { resetKeep(); SetPages(PagesUnchosen) })
	const n = 12 << 20 // a class no other test uses
	size := allocSize(n, false)
	Keep(size + size/2) // room for one

	held := Make(n)
	part := held[100:200] // a reader's slice of it
	heldAt := addr(held)
	held = nil
	_, _ = Make(n), Make(n) // dropped at once
	collectUntil(t, "both dropped buffers' finalizers run", func() bool {
		keep.mu.Lock()
		defer keep.mu.Unlock()
		return keep.kept+keep.refused >= 2
	})
	if keep.kept != 1 {
		t.Fatalf("%d of the two dropped buffers kept, want 1 (the bound)", keep.kept)
	}
	for range 3 {
		runtime.GC()
	}
	if Kept() != size {
		t.Fatalf("kept %d bytes, want %d (one buffer: the bound)", Kept(), size)
	}
	if keptAt(size, heldAt, false) {
		t.Error("a buffer still referenced through a slice of it was kept")
	}
	if part[0] = 7; part[0] != 7 {
		t.Fatal("unreachable")
	}
	runtime.KeepAlive(part)

	// A smaller bound drops what no longer fits.
	Keep(size - 1)
	if Kept() != 0 {
		t.Fatalf("kept %d bytes after Keep(%d)", Kept(), size-1)
	}
	keep.mu.Lock()
	bases := keep.free[size]
	for i, p := range bases[:cap(bases)] {
		if p != nil {
			t.Errorf("a dropped allocation still referenced at %d of the keep's list: the collector cannot free it", i)
		}
	}
	keep.mu.Unlock()
}

// Keep(0), the default, keeps nothing: Make sets no finalizer.
func TestKeepOffKeepsNothing(t *testing.T) {
	resetReserve()
	resetKeep()
	_ = Make(8 << 20)
	for range 3 {
		runtime.GC()
	}
	time.Sleep(10 * time.Millisecond)
	if Kept() != 0 || keep.kept != 0 {
		t.Fatalf("kept %d bytes (%d buffers) with Keep off", Kept(), keep.kept)
	}
}
