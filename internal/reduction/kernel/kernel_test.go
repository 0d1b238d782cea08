package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/hoplite-go/hoplite/messages"
)

var (
	allOps = []messages.ReduceOp{
		messages.ReduceOp_SUM, messages.ReduceOp_MIN,
		messages.ReduceOp_MAX, messages.ReduceOp_PROD,
	}
	allDTypes = []messages.DType{
		messages.DType_FLOAT32, messages.DType_FLOAT64,
		messages.DType_INT32, messages.DType_INT64,
	}
	// Element counts: empty, single element, below and around the unroll
	// factor (remainder loops), and a large odd count.
	testCounts = []int{0, 1, 2, 7, 8, 9, 15, 16, 17, 4097}
)

// alignedBuf returns a slice of n bytes starting at an address that is a
// multiple of 8 plus off, carved from a larger allocation.
func alignedBuf(n, off int) []byte {
	raw := make([]byte, n+16)
	skip := int((8 - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%8) % 8)
	return raw[skip+off : skip+off+n : skip+off+n]
}

// refApply is the straightforward reference: decode one element at a time,
// combine with Go operators or math.Min/math.Max (plus the documented
// NaN-beats-Inf rule), encode it back.
func refApply(op messages.ReduceOp, dt messages.DType, dst, src []byte) {
	le := binary.LittleEndian
	w, _ := Width(dt)
	for i := 0; i < len(dst); i += w {
		switch dt {
		case messages.DType_FLOAT32, messages.DType_FLOAT64:
			var a, b float64
			if dt == messages.DType_FLOAT32 {
				a = float64(math.Float32frombits(le.Uint32(dst[i:])))
				b = float64(math.Float32frombits(le.Uint32(src[i:])))
			} else {
				a = math.Float64frombits(le.Uint64(dst[i:]))
				b = math.Float64frombits(le.Uint64(src[i:]))
			}
			var r float64
			switch op {
			case messages.ReduceOp_SUM:
				r = a + b
			case messages.ReduceOp_PROD:
				r = a * b
			case messages.ReduceOp_MIN:
				r = math.Min(a, b)
			case messages.ReduceOp_MAX:
				r = math.Max(a, b)
			}
			if (op == messages.ReduceOp_MIN || op == messages.ReduceOp_MAX) && (a != a || b != b) {
				// Documented: NaN always wins, even against ±Inf (where
				// math.Min/Max would return the infinity).
				r = math.NaN()
			}
			if dt == messages.DType_FLOAT32 {
				// float32 ops are exactly the float64 op rounded once
				// (float64 has > 2*24+2 significand bits).
				le.PutUint32(dst[i:], math.Float32bits(float32(r)))
			} else {
				le.PutUint64(dst[i:], math.Float64bits(r))
			}
		case messages.DType_INT32:
			a, b := int64(int32(le.Uint32(dst[i:]))), int64(int32(le.Uint32(src[i:])))
			var r int64
			switch op {
			case messages.ReduceOp_SUM:
				r = a + b
			case messages.ReduceOp_PROD:
				r = a * b
			case messages.ReduceOp_MIN:
				r = min(a, b)
			case messages.ReduceOp_MAX:
				r = max(a, b)
			}
			le.PutUint32(dst[i:], uint32(r)) // truncation == two's complement wrap
		case messages.DType_INT64:
			a, b := le.Uint64(dst[i:]), le.Uint64(src[i:])
			var r uint64
			switch op {
			case messages.ReduceOp_SUM:
				r = a + b // unsigned add/mul give the same bits as wrapped signed
			case messages.ReduceOp_PROD:
				r = a * b
			case messages.ReduceOp_MIN:
				r = uint64(min(int64(a), int64(b)))
			case messages.ReduceOp_MAX:
				r = uint64(max(int64(a), int64(b)))
			}
			le.PutUint64(dst[i:], r)
		}
	}
}

// fill writes n random elements of dt into b. Floats include a sprinkling
// of special values (±0, ±Inf, NaN, extremes) so their handling is
// compared against the reference too; integers include extremes to force
// overflow.
func fill(r *rand.Rand, dt messages.DType, b []byte) {
	le := binary.LittleEndian
	f64special := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat32, -math.MaxFloat32, 1, -1}
	w, _ := Width(dt)
	for i := 0; i < len(b); i += w {
		special := r.IntN(8) == 0
		switch dt {
		case messages.DType_FLOAT32:
			v := float32(r.NormFloat64() * 1e3)
			if special {
				v = float32(f64special[r.IntN(len(f64special))])
			}
			le.PutUint32(b[i:], math.Float32bits(v))
		case messages.DType_FLOAT64:
			v := r.NormFloat64() * 1e6
			if special {
				v = f64special[r.IntN(len(f64special))]
				if v == math.MaxFloat32 {
					v = math.MaxFloat64
				}
			}
			le.PutUint64(b[i:], math.Float64bits(v))
		case messages.DType_INT32:
			v := uint32(r.Uint64())
			if special {
				v = []uint32{0, 1, math.MaxInt32, 1 << 31, math.MaxUint32}[r.IntN(5)]
			}
			le.PutUint32(b[i:], v)
		case messages.DType_INT64:
			v := r.Uint64()
			if special {
				v = []uint64{0, 1, math.MaxInt64, 1 << 63, math.MaxUint64}[r.IntN(5)]
			}
			le.PutUint64(b[i:], v)
		}
	}
}

// sameElements compares two buffers element by element, treating any two
// NaNs as equal (NaN payloads are not specified) and distinguishing -0
// from +0. It returns a description of the first difference.
func sameElements(dt messages.DType, got, want []byte) string {
	le := binary.LittleEndian
	w, _ := Width(dt)
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := 0; i < len(got); i += w {
		switch dt {
		case messages.DType_FLOAT32:
			g, x := math.Float32frombits(le.Uint32(got[i:])), math.Float32frombits(le.Uint32(want[i:]))
			if g != g && x != x {
				continue
			}
			if math.Float32bits(g) != math.Float32bits(x) {
				return fmt.Sprintf("element %d: got %v (%#x), want %v (%#x)", i/w, g, math.Float32bits(g), x, math.Float32bits(x))
			}
		case messages.DType_FLOAT64:
			g, x := math.Float64frombits(le.Uint64(got[i:])), math.Float64frombits(le.Uint64(want[i:]))
			if g != g && x != x {
				continue
			}
			if math.Float64bits(g) != math.Float64bits(x) {
				return fmt.Sprintf("element %d: got %v (%#x), want %v (%#x)", i/w, g, math.Float64bits(g), x, math.Float64bits(x))
			}
		default:
			for j := i; j < i+w; j++ {
				if got[j] != want[j] {
					return fmt.Sprintf("element %d: got % x, want % x", i/w, got[i:i+w], want[i:i+w])
				}
			}
		}
	}
	return ""
}

// TestAccumulateMatchesReference runs every op × dtype × length through
// Accumulate on aligned and unaligned buffers, and through both internal
// paths directly, and compares each result with refApply.
func TestAccumulateMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range allDTypes {
		w, _ := Width(dt)
		for _, op := range allOps {
			for _, n := range testCounts {
				size := n * w
				src0, dst0 := make([]byte, size), make([]byte, size)
				fill(r, dt, src0)
				fill(r, dt, dst0)
				want := append([]byte(nil), dst0...)
				refApply(op, dt, want, src0)

				type variant struct {
					name           string
					dstOff, srcOff int
					run            func(dst, src []byte) error
				}
				public := func(dst, src []byte) error { return Accumulate(op, dt, dst, src) }
				variants := []variant{
					{"aligned", 0, 0, public},
					{"dst+1", 1, 0, public},
					{"src+1", 0, 1, public},
					{"both+1", 1, 1, public},
					{"both+3", 3, 3, public},
					{"both+4", 4, 4, public}, // aligned for 4-byte types only
					{"generic", 0, 0, func(d, s []byte) error { accumulateGeneric(op, dt, d, s); return nil }},
					{"generic+1", 1, 1, func(d, s []byte) error { accumulateGeneric(op, dt, d, s); return nil }},
				}
				if littleEndianHost && n > 0 {
					variants = append(variants, variant{"fast", 0, 0, func(d, s []byte) error { accumulateFast(op, dt, d, s); return nil }})
				}
				for _, v := range variants {
					name := fmt.Sprintf("%s/%s/n=%d/%s", dt, op, n, v.name)
					dst, src := alignedBuf(size, v.dstOff), alignedBuf(size, v.srcOff)
					copy(dst, dst0)
					copy(src, src0)
					if err := v.run(dst, src); err != nil {
						t.Errorf("%s: unexpected error %v", name, err)
						continue
					}
					if d := sameElements(dt, dst, want); d != "" {
						t.Errorf("%s: %s", name, d)
					}
					if d := sameElements(dt, src, src0); d != "" {
						t.Errorf("%s: src modified: %s", name, d)
					}
				}
			}
		}
	}
}

// TestAccumulateAliased checks dst and src being the same slice.
func TestAccumulateAliased(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dt := range allDTypes {
		w, _ := Width(dt)
		for _, op := range allOps {
			for _, off := range []int{0, 1} {
				b := alignedBuf(37*w, off)
				fill(r, dt, b)
				want := append([]byte(nil), b...)
				refApply(op, dt, want, append([]byte(nil), b...))
				if err := Accumulate(op, dt, b, b); err != nil {
					t.Fatal(err)
				}
				if d := sameElements(dt, b, want); d != "" {
					t.Errorf("%s/%s/off=%d: %s", dt, op, off, d)
				}
			}
		}
	}
}

// TestPathSelection checks that aligned buffers take the fast path on a
// little-endian host and that an offset-1 (misaligned) buffer never does.
func TestPathSelection(t *testing.T) {
	for _, w := range []int{4, 8} {
		a, b := alignedBuf(64, 0), alignedBuf(64, 0)
		if got := canFast(a, b, w); got != littleEndianHost {
			t.Errorf("w=%d aligned: canFast=%v, want %v", w, got, littleEndianHost)
		}
		for _, off := range []int{1, 2, 3} {
			if canFast(alignedBuf(64, off), b, w) || canFast(a, alignedBuf(64, off), w) {
				t.Errorf("w=%d off=%d: canFast on a misaligned buffer", w, off)
			}
		}
	}
	if canFast(alignedBuf(64, 4), alignedBuf(64, 4), 8) {
		t.Error("w=8 off=4: canFast on a 4-aligned buffer")
	}
	if got := canFast(alignedBuf(64, 4), alignedBuf(64, 4), 4); got != littleEndianHost {
		t.Errorf("w=4 off=4: canFast=%v, want %v", got, littleEndianHost)
	}
	var x uint32 = 0x01020304
	host := *(*[4]byte)(unsafe.Pointer(&x))
	if (host == [4]byte{4, 3, 2, 1}) != littleEndianHost {
		t.Errorf("littleEndianHost=%v, host bytes % x", littleEndianHost, host)
	}
}

func encode(dt messages.DType, vals ...float64) []byte {
	w, _ := Width(dt)
	b := make([]byte, len(vals)*w)
	le := binary.LittleEndian
	for i, v := range vals {
		switch dt {
		case messages.DType_FLOAT32:
			le.PutUint32(b[i*w:], math.Float32bits(float32(v)))
		case messages.DType_FLOAT64:
			le.PutUint64(b[i*w:], math.Float64bits(v))
		}
	}
	return b
}

func decode(dt messages.DType, b []byte) []float64 {
	var out []float64
	le := binary.LittleEndian
	switch dt {
	case messages.DType_FLOAT32:
		for i := 0; i < len(b); i += 4 {
			out = append(out, float64(math.Float32frombits(le.Uint32(b[i:]))))
		}
	case messages.DType_FLOAT64:
		for i := 0; i < len(b); i += 8 {
			out = append(out, math.Float64frombits(le.Uint64(b[i:])))
		}
	}
	return out
}

// TestFloatMinMaxSpecials pins the documented NaN and signed-zero
// behaviour of MIN and MAX on both paths.
func TestFloatMinMaxSpecials(t *testing.T) {
	nan, negz, inf := math.NaN(), math.Copysign(0, -1), math.Inf(1)
	// 11 elements so both the unrolled body and the remainder are hit.
	dst := []float64{nan, 1, nan, negz, 0, -inf, inf, 2, nan, -inf, nan}
	src := []float64{1, nan, nan, 0, negz, 5, 5, nan, 3, nan, inf}
	type expect func(float64) bool
	isNaN := func(v float64) bool { return math.IsNaN(v) }
	eq := func(x float64) expect {
		return func(v float64) bool { return v == x && math.Signbit(v) == math.Signbit(x) }
	}
	wantMin := []expect{isNaN, isNaN, isNaN, eq(negz), eq(negz), eq(-inf), eq(5), isNaN, isNaN, isNaN, isNaN}
	wantMax := []expect{isNaN, isNaN, isNaN, eq(0), eq(0), eq(5), eq(inf), isNaN, isNaN, isNaN, isNaN}
	for _, dt := range []messages.DType{messages.DType_FLOAT32, messages.DType_FLOAT64} {
		for _, op := range []messages.ReduceOp{messages.ReduceOp_MIN, messages.ReduceOp_MAX} {
			want := wantMin
			if op == messages.ReduceOp_MAX {
				want = wantMax
			}
			for _, off := range []int{0, 1} { // fast path, generic path
				s := encode(dt, src...)
				d := alignedBuf(len(s), off)
				copy(d, encode(dt, dst...))
				if err := Accumulate(op, dt, d, s); err != nil {
					t.Fatal(err)
				}
				for i, v := range decode(dt, d) {
					if !want[i](v) {
						t.Errorf("%s/%s/off=%d: element %d: op(%v, %v) = %v", dt, op, off, i, dst[i], src[i], v)
					}
				}
			}
		}
	}
}

// TestIntegerWrap pins two's complement wrap-around for SUM and PROD.
func TestIntegerWrap(t *testing.T) {
	le := binary.LittleEndian
	for _, off := range []int{0, 1} {
		d32, s32 := alignedBuf(12, off), alignedBuf(12, off)
		for i, v := range [][2]int32{{math.MaxInt32, 1}, {math.MinInt32, -1}, {1 << 30, 4}} {
			le.PutUint32(d32[4*i:], uint32(v[0]))
			le.PutUint32(s32[4*i:], uint32(v[1]))
		}
		p32 := append([]byte(nil), d32...)
		if err := Accumulate(messages.ReduceOp_SUM, messages.DType_INT32, d32, s32); err != nil {
			t.Fatal(err)
		}
		if err := Accumulate(messages.ReduceOp_PROD, messages.DType_INT32, p32, s32); err != nil {
			t.Fatal(err)
		}
		wantSum := []int32{math.MinInt32, math.MaxInt32, 1<<30 + 4}
		wantProd := []int32{math.MaxInt32, math.MinInt32, 0} // MinInt32*-1 wraps to itself; 2^32 wraps to 0
		for i := range 3 {
			if g := int32(le.Uint32(d32[4*i:])); g != wantSum[i] {
				t.Errorf("off=%d int32 SUM[%d] = %d, want %d", off, i, g, wantSum[i])
			}
			if g := int32(le.Uint32(p32[4*i:])); g != wantProd[i] {
				t.Errorf("off=%d int32 PROD[%d] = %d, want %d", off, i, g, wantProd[i])
			}
		}

		d64, s64 := alignedBuf(16, off), alignedBuf(16, off)
		for i, v := range [][2]int64{{math.MaxInt64, 1}, {1 << 62, 4}} {
			le.PutUint64(d64[8*i:], uint64(v[0]))
			le.PutUint64(s64[8*i:], uint64(v[1]))
		}
		p64 := append([]byte(nil), d64...)
		if err := Accumulate(messages.ReduceOp_SUM, messages.DType_INT64, d64, s64); err != nil {
			t.Fatal(err)
		}
		if err := Accumulate(messages.ReduceOp_PROD, messages.DType_INT64, p64, s64); err != nil {
			t.Fatal(err)
		}
		if g := int64(le.Uint64(d64)); g != math.MinInt64 {
			t.Errorf("off=%d int64 MaxInt64+1 = %d, want MinInt64", off, g)
		}
		if g := int64(le.Uint64(p64[8:])); g != 0 {
			t.Errorf("off=%d int64 2^62*4 = %d, want 0", off, g)
		}
	}
}

func wantInvalid(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want INVALID_ARGUMENT", what)
		return
	}
	if !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("%s: error %v does not match ErrInvalidArgument", what, err)
	}
	if err.Error() == "" {
		t.Errorf("%s: empty error message", what)
	}
}

// TestErrors covers every INVALID_ARGUMENT case of the exported API.
func TestErrors(t *testing.T) {
	const f32, i64 = messages.DType_FLOAT32, messages.DType_INT64
	const sum = messages.ReduceOp_SUM
	badOps := []messages.ReduceOp{messages.ReduceOp_REDUCE_OP_UNSPECIFIED, messages.ReduceOp(99), messages.ReduceOp(-1)}
	badDTypes := []messages.DType{messages.DType_DTYPE_UNSPECIFIED, messages.DType(42), messages.DType(-3)}

	for _, dt := range badDTypes {
		if _, err := Width(dt); true {
			wantInvalid(t, fmt.Sprintf("Width(%d)", dt), err)
		}
		wantInvalid(t, fmt.Sprintf("Validate dtype %d", dt), Validate(sum, dt, 8))
		wantInvalid(t, fmt.Sprintf("Accumulate dtype %d", dt), Accumulate(sum, dt, make([]byte, 8), make([]byte, 8)))
		wantInvalid(t, fmt.Sprintf("Accumulate empty dtype %d", dt), Accumulate(sum, dt, nil, nil))
	}
	for _, op := range badOps {
		wantInvalid(t, fmt.Sprintf("Validate op %d", op), Validate(op, f32, 8))
		wantInvalid(t, fmt.Sprintf("Accumulate op %d", op), Accumulate(op, f32, make([]byte, 8), make([]byte, 8)))
		wantInvalid(t, fmt.Sprintf("Accumulate empty op %d", op), Accumulate(op, f32, nil, nil))
	}
	for _, size := range []int64{1, 2, 3, 5, 4097} {
		wantInvalid(t, fmt.Sprintf("Validate f32 size %d", size), Validate(sum, f32, size))
	}
	for _, size := range []int64{4, 12, 4100} {
		wantInvalid(t, fmt.Sprintf("Validate i64 size %d", size), Validate(sum, i64, size))
	}
	wantInvalid(t, "Validate negative size", Validate(sum, f32, -4))

	for _, c := range []struct {
		dt       messages.DType
		dst, src int
	}{
		{f32, 8, 4}, {f32, 4, 8}, {f32, 0, 4}, {f32, 6, 6}, {f32, 1, 1}, {i64, 12, 12}, {i64, 4, 4}, {i64, 16, 8},
	} {
		dst := make([]byte, c.dst)
		for i := range dst {
			dst[i] = 0xAB
		}
		err := Accumulate(sum, c.dt, dst, make([]byte, c.src))
		wantInvalid(t, fmt.Sprintf("Accumulate %s len %d/%d", c.dt, c.dst, c.src), err)
		for _, v := range dst {
			if v != 0xAB {
				t.Errorf("Accumulate %s len %d/%d modified dst on error", c.dt, c.dst, c.src)
				break
			}
		}
	}

	// Valid inputs pass.
	for _, dt := range allDTypes {
		w, err := Width(dt)
		if err != nil {
			t.Fatalf("Width(%s): %v", dt, err)
		}
		if (w != 4) == (dt == f32 || dt == messages.DType_INT32) {
			t.Errorf("Width(%s) = %d", dt, w)
		}
		for _, op := range allOps {
			for _, size := range []int64{0, int64(w), 1 << 20} {
				if err := Validate(op, dt, size); err != nil {
					t.Errorf("Validate(%s, %s, %d) = %v", op, dt, size, err)
				}
			}
			if err := Accumulate(op, dt, nil, nil); err != nil {
				t.Errorf("Accumulate(%s, %s, nil, nil) = %v", op, dt, err)
			}
			if err := Accumulate(op, dt, []byte{}, nil); err != nil {
				t.Errorf("Accumulate(%s, %s, empty, nil) = %v", op, dt, err)
			}
		}
	}
}

func TestAlignDown(t *testing.T) {
	cases := []struct {
		n    int64
		dt   messages.DType
		want int64
	}{
		{0, messages.DType_FLOAT32, 0},
		{3, messages.DType_FLOAT32, 0},
		{4, messages.DType_FLOAT32, 4},
		{1<<20 + 3, messages.DType_INT32, 1 << 20},
		{7, messages.DType_FLOAT64, 0},
		{17, messages.DType_INT64, 16},
		{1<<40 + 7, messages.DType_INT64, 1 << 40},
		{-1, messages.DType_INT64, -8},
		{-8, messages.DType_INT64, -8},
		{13, messages.DType_DTYPE_UNSPECIFIED, 13},
	}
	for _, c := range cases {
		if got := AlignDown(c.n, c.dt); got != c.want {
			t.Errorf("AlignDown(%d, %s) = %d, want %d", c.n, c.dt, got, c.want)
		}
	}
}

// TestChunkedEqualsWhole checks the documented chunking contract: folding
// an object chunk by chunk at AlignDown boundaries, with chunks placed at
// arbitrary addresses, gives the same result as one call.
func TestChunkedEqualsWhole(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range allDTypes {
		w, _ := Width(dt)
		size := 1001 * w
		src, dst := make([]byte, size), make([]byte, size)
		fill(r, dt, src)
		fill(r, dt, dst)
		whole := append([]byte(nil), dst...)
		if err := Accumulate(messages.ReduceOp_SUM, dt, whole, src); err != nil {
			t.Fatal(err)
		}
		chunked := append([]byte(nil), dst...)
		for off := int64(0); off < int64(size); {
			end := min(int64(size), off+AlignDown(int64(r.IntN(300)+w), dt))
			d := alignedBuf(int(end-off), r.IntN(8))
			copy(d, chunked[off:end])
			if err := Accumulate(messages.ReduceOp_SUM, dt, d, src[off:end]); err != nil {
				t.Fatal(err)
			}
			copy(chunked[off:end], d)
			off = end
		}
		if d := sameElements(dt, chunked, whole); d != "" {
			t.Errorf("%s: %s", dt, d)
		}
	}
}
