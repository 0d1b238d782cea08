package storenode

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

type celsius float32

func roundTrip[T Number](t *testing.T, v []T, dt messages.DType) {
	t.Helper()
	if got := DTypeOf[T](); got != dt {
		t.Fatalf("DTypeOf = %v, want %v", got, dt)
	}
	b := Encode(v)
	if w, _ := kernel.Width(dt); len(b) != w*len(v) {
		t.Fatalf("%v: %d bytes for %d elements", dt, len(b), len(v))
	}
	got, err := Decode[T](b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, v) {
		t.Fatalf("%v: decoded %v, want %v", dt, got, v)
	}
}

func TestEncodeDecode(t *testing.T) {
	roundTrip(t, []float32{0, -1.5, math.MaxFloat32, float32(math.Inf(-1)), math.SmallestNonzeroFloat32}, messages.DType_FLOAT32)
	roundTrip(t, []float64{0, -2.25, math.MaxFloat64, math.Inf(1)}, messages.DType_FLOAT64)
	roundTrip(t, []int32{0, -1, math.MinInt32, math.MaxInt32}, messages.DType_INT32)
	roundTrip(t, []int64{0, -1, math.MinInt64, math.MaxInt64}, messages.DType_INT64)
	roundTrip(t, []celsius{-40, 21.5}, messages.DType_FLOAT32) // a named type: its underlying kind
	roundTrip(t, []float32{}, messages.DType_FLOAT32)

	// Little-endian, as the Reduce kernels read it.
	if b := Encode([]int32{0x01020304}); !slices.Equal(b, []byte{4, 3, 2, 1}) {
		t.Fatalf("int32 bytes %v, want little-endian", b)
	}
	// Encoded slices reduce to the encoded sum.
	dst, src := Encode([]float64{1, 2, 3}), Encode([]float64{10, 20, 30})
	if err := kernel.Accumulate(messages.ReduceOp_SUM, messages.DType_FLOAT64, dst, src); err != nil {
		t.Fatal(err)
	}
	if sum, _ := Decode[float64](dst); !slices.Equal(sum, []float64{11, 22, 33}) {
		t.Fatalf("sum %v", sum)
	}
}

func TestDecodeRejectsPartialElements(t *testing.T) {
	_, err := Decode[float64](make([]byte, 12))
	if !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("12 bytes as float64s: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := Decode[int32](make([]byte, 12)); err != nil {
		t.Fatalf("12 bytes as int32s: %v", err)
	}
}
