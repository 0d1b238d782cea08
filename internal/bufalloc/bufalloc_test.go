package bufalloc

import (
	"bytes"
	"testing"
)

func TestMakeIsExactlyN(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 64 << 10, 4<<20 + 12345} {
		b := Make(n)
		if b == nil || len(b) != n || cap(b) != n {
			t.Fatalf("Make(%d): nil %v, len %d, cap %d", n, b == nil, len(b), cap(b))
		}
		for i := range b {
			b[i] = byte(i)
		}
		if n > 0 && (b[0] != 0 || b[n-1] != byte(n-1)) {
			t.Fatalf("Make(%d): writes do not stick", n)
		}
	}
}

// One allocation per buffer, and no more memory than asked for (rounded
// to the allocator's size class, as make's).
func TestMakeAllocatesOnce(t *testing.T) {
	for _, n := range []int{1 << 10, 4<<20 + 1} {
		if a := testing.AllocsPerRun(5, func() { _ = Make(n) }); a != 1 {
			t.Errorf("Make(%d): %v allocations, want 1", n, a)
		}
	}
}

// Buffers are independent: writing one never shows in another (a reused
// allocation is handed out only after the garbage collector freed it).
func TestMakeBuffersAreDistinct(t *testing.T) {
	const n = 4 << 20
	a, b := Make(n), Make(n)
	for i := range a {
		a[i] = 1
	}
	for i := range b {
		b[i] = 2
	}
	if !bytes.Equal(a, bytes.Repeat([]byte{1}, n)) {
		t.Fatal("a buffer changed when another was written")
	}
}
