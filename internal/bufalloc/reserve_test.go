package bufalloc

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
	"weak"
)

// resetReserve forgets the process's reserve (tests only).
func resetReserve() {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	warm.done, warm.res, warm.whole, warm.held, warm.next, warm.reopened = false, Reservation{}, nil, weak.Pointer[byte]{}, 0, 0
	warm.gen++ // the dropped reserve's finalizer does nothing
}

// Large buffers are cut from the reserve, each at a huge page boundary
// after the one before, until what is left is too small; then Make
// allocates as it does without a reserve. Small buffers never touch it, and a second
// Reserve changes nothing.
func TestReserveServesTheFirstLargeBuffers(t *testing.T) {
	resetReserve()
	t.Cleanup(resetReserve)
	const n = 3 * HugeMin // 12 MiB
	res := Reserve(n)
	if res.Bytes != n {
		t.Fatalf("reserved %d bytes, want %d", res.Bytes, n)
	}
	if again := Reserve(10 * n); again != res {
		t.Fatalf("a second Reserve made %+v, want the first's %+v", again, res)
	}
	base := addr(warm.whole)
	if small := Make(HugeMin - 1); len(small) != HugeMin-1 || Reserved() != n {
		t.Fatalf("a buffer under HugeMin took from the reserve: %d left of %d", Reserved(), n)
	}
	a := Make(HugeMin + 1) // takes 4 MiB + 1, the next cut 6 MiB on
	b := Make(HugeMin)
	if len(a) != HugeMin+1 || cap(a) != HugeMin+1 || len(b) != HugeMin || cap(b) != HugeMin {
		t.Fatalf("len/cap %d/%d and %d/%d", len(a), cap(a), len(b), cap(b))
	}
	if got := uintptr(unsafe.Pointer(&a[0])); got != base {
		t.Fatalf("the first buffer starts %d bytes into the reserve, want 0", got-base)
	}
	if got := uintptr(unsafe.Pointer(&b[0])) - base; got != 6<<20 {
		t.Fatalf("the second buffer starts %d bytes into the reserve, want %d (the huge page boundary after the first)", got, 6<<20)
	}
	if left := Reserved(); left != n-10<<20 {
		t.Fatalf("%d bytes left, want %d", left, n-10<<20)
	}
	c := Make(HugeMin) // 2 MiB left: too small
	if p := uintptr(unsafe.Pointer(&c[0])); p >= base && p < base+n {
		t.Fatal("a buffer larger than what was left was cut from the reserve")
	}
	if Reserved() != 2<<20 {
		t.Fatalf("%d bytes left after a buffer that did not fit, want %d", Reserved(), 2<<20)
	}
	// The pieces are distinct memory: writing one leaves the other.
	a[len(a)-1], b[0] = 1, 2
	if a[len(a)-1] != 1 || b[0] != 2 {
		t.Fatal("two buffers cut from the reserve overlap")
	}
}

// A reserve under HugeMin is none: Make never cuts small buffers from it.
func TestReserveBelowHugeMinIsNone(t *testing.T) {
	resetReserve()
	t.Cleanup(resetReserve)
	if res := Reserve(HugeMin - 1); res.Bytes != 0 || Reserved() != 0 {
		t.Fatalf("reserved %+v (%d left), want none", res, Reserved())
	}
}

// Once every piece cut from the reserve is unreachable, the whole of it
// is ready again, in the same memory; while one is referenced, only what
// is left after the pieces is, and an unused reserve stays as it is.
func TestReserveIsWholeAgainOnceItsPiecesAreUnreachable(t *testing.T) {
	resetReserve()
	t.Cleanup(resetReserve)
	reopened := func() int64 {
		warm.mu.Lock()
		defer warm.mu.Unlock()
		return warm.reopened
	}
	const n = 2 * HugeMin // 8 MiB
	Reserve(n)
	base := addr(warm.whole)
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if Reserved() != n || reopened() != 0 {
		t.Fatalf("an unused reserve: %d bytes ready, made whole %d times; want %d, none", Reserved(), reopened(), n)
	}
	if big := Make(n + 1); Reserved() != n || addr(big) == base {
		t.Fatalf("a buffer larger than the whole reserve: %d bytes ready, want %d", Reserved(), n)
	}
	a := Make(HugeMin)
	b := Make(HugeMin) // the last 4 MiB
	if addr(a) != base || addr(b) != base+HugeMin {
		t.Fatalf("pieces at +%d and +%d, want +0 and +%d", addr(a)-base, addr(b)-base, HugeMin)
	}
	if Reserved() != 0 {
		t.Fatalf("%d bytes ready with the whole reserve cut, want none", Reserved())
	}
	a[0], a = 7, nil
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if Reserved() != 0 || reopened() != 0 {
		t.Fatal("the reserve was made whole again while a piece was still referenced")
	}
	b[0] = 1
	runtime.KeepAlive(b)
	b = nil
	collectUntil(t, "the reserve whole again", func() bool { return Reserved() == n })
	if got := reopened(); got != 1 {
		t.Errorf("made whole %d times, want once", got)
	}
	c := Make(HugeMin)
	if addr(c) != base {
		t.Fatalf("the first buffer after the reserve was whole again starts at +%d, want its start", addr(c)-base)
	}
	if c[0] != 7 {
		t.Fatalf("the reserve's first byte is %d, want the 7 written before: not the same memory", c[0])
	}

	// A piece that stays referenced: the ones after it are cut from what
	// is left, and dropping them alone does not make the reserve whole.
	d := Make(HugeMin)
	if addr(d) != base+HugeMin {
		t.Fatalf("a piece beside one still referenced at +%d, want +%d", addr(d)-base, HugeMin)
	}
	d = nil
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if Reserved() != 0 || reopened() != 1 {
		t.Fatalf("with one piece referenced: %d bytes ready, made whole %d times; want none, once", Reserved(), reopened())
	}
	runtime.KeepAlive(c)
}
