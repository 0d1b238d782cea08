package bench

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// Check accepts exactly what expected makes, whole or summed, at sizes
// that do not fall on its window, and names the first differing offset.
func TestCheckAgreesWithexpected(t *testing.T) {
	odd := int64(3*checkWindow + 13)
	float := int64(2*checkWindow + 4*1001)
	for _, srcs := range [][]DataSpec{
		{{ID: "one", Size: odd}},
		{{ID: "small", Size: 7}},
		{{ID: "f0", Size: float, Float32: true, Sources: 5}, {ID: "f1", Size: float, Float32: true, Sources: 5},
			{ID: "f2", Size: float, Float32: true, Sources: 5}, {ID: "f3", Size: float, Float32: true, Sources: 5},
			{ID: "f4", Size: float, Float32: true, Sources: 5}},
	} {
		want, err := expected(srcs)
		if err != nil {
			t.Fatal(err)
		}
		if err := Check("x", want, srcs); err != nil {
			t.Fatalf("%s: Check of expected's bytes: %v", srcs[0].ID, err)
		}
		for _, off := range []int{0, len(want) / 2, len(want) - 1} {
			bad := append([]byte(nil), want...)
			bad[off] ^= 0x40
			err := Check("x", bad, srcs)
			if err == nil || !strings.Contains(err.Error(), "offset "+strconv.Itoa(off)+" on") {
				t.Errorf("%s: a byte flipped at %d: %v", srcs[0].ID, off, err)
			}
		}
		if err := Check("x", want[:len(want)-1], srcs); err == nil || !strings.Contains(err.Error(), "bytes, want") {
			t.Errorf("%s: one byte short: %v", srcs[0].ID, err)
		}
	}
	mixed := []DataSpec{{ID: "a", Size: 8, Float32: true}, {ID: "b", Size: 12, Float32: true}}
	if err := Check("x", make([]byte, 8), mixed); err == nil || !strings.Contains(err.Error(), "equal size") {
		t.Errorf("sources of unequal sizes: %v", err)
	}
}

// Checking a 4 MiB sum of 8 sources allocates a few windows, not the
// object: a verification between repetitions leaves the heap as it was.
// 4 MiB is 16 windows and four times the allocation the test allows, so
// a Check that made the object whole fails it; 32 MiB took 21 s under
// -race for the same check.
func TestCheckDoesNotAllocateTheObject(t *testing.T) {
	const size = 4 << 20
	var srcs []DataSpec
	for i := range 8 {
		srcs = append(srcs, DataSpec{ID: "s" + strconv.Itoa(i), Size: size, Float32: true, Sources: 8})
	}
	got, err := expected(srcs)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if err := Check("sum", got, srcs); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 4*checkWindow+64<<10 {
		t.Fatalf("Check allocated %d bytes for a %d-byte object", n, size)
	}
}

// expected returns, whole, what an object made from srcs must hold: the one
// source's bytes, or the float32 SUM of several.
func expected(srcs []DataSpec) ([]byte, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("no sources")
	}
	acc := Generate(srcs[0])
	if len(srcs) == 1 {
		return acc, nil
	}
	buf := make([]byte, len(acc))
	for _, s := range srcs[1:] {
		if !s.Float32 || s.Size != int64(len(acc)) {
			return nil, fmt.Errorf("source %s: a sum needs float32 sources of equal size", s.ID)
		}
		fill(s, buf)
		addFloat32s(acc, buf)
	}
	return acc, nil
}
