package bufalloc

import (
	"testing"
	"unsafe"
)

// resetReserve forgets the process's reserve (tests only).
func resetReserve() {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	warm.done, warm.res, warm.rest = false, Reservation{}, nil
}

// Large buffers are cut from the reserve, each at a huge page boundary
// after the one before, until what is left is too small; then Make
// allocates as before. Small buffers never touch it, and a second
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
	base := uintptr(unsafe.Pointer(unsafe.SliceData(warm.rest)))
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
