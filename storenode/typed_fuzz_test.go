package storenode

import (
	"bytes"
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// decodes checks Decode[T] of an object's bytes, which another member
// sent: a length that is not a whole number of elements is
// INVALID_ARGUMENT, any other decodes, and encodes back to the same bytes.
func decodes[T Number](t *testing.T, b []byte) {
	t.Helper()
	v, err := Decode[T](b)
	w := width(DTypeOf[T]())
	if len(b)%w != 0 {
		if !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("Decode[%T] of %d bytes: %v, want INVALID_ARGUMENT", *new(T), len(b), err)
		}
		return
	}
	if err != nil || len(v) != len(b)/w || !bytes.Equal(Encode(v), b) {
		t.Fatalf("Decode[%T](%x) = %v, %v; encodes back to %x", *new(T), b, v, err, Encode(v))
	}
}

// Decode reads any bytes as each element type without a panic.
func FuzzDecodeNumbers(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Add(Encode([]float64{1.5, -2}))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0xc0, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		decodes[float32](t, b)
		decodes[float64](t, b)
		decodes[int32](t, b)
		decodes[int64](t, b)
	})
}
