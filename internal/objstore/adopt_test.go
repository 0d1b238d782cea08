package objstore

import (
	"bytes"
	"errors"
	"testing"
	"unsafe"

	"github.com/hoplite-go/hoplite/messages"
)

// Adopt makes the given bytes the object's buffer itself, readers wake
// to all of them at once, and it refuses what would break the object:
// another size, bytes already written, a superseded writer.
func TestWriterAdopt(t *testing.T) {
	s := NewStore(1000)
	o, _ := s.Reserve("o")
	if _, err := s.Allocate(o, 4, 0); err != nil {
		t.Fatal(err)
	}
	old := o.NewWriter()
	w := o.NewWriter()
	p := []byte{1, 2, 3, 4, 5}[:4] // room past its end, which the object must not reach
	if err := old.Adopt(p); !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("a superseded writer adopted: %v", err)
	}
	if err := w.Adopt(p[:3]); !errors.Is(err, messages.ErrInternal) {
		t.Fatalf("3 bytes adopted for an object of 4: %v", err)
	}
	ch := asyncReadAt(guardCtx(t), o, 0, 10)
	if err := w.Adopt(p); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || !bytes.Equal(r.b, p) {
		t.Fatalf("a reader waiting before Adopt got %v, %v", r.b, r.err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	b, err := o.Bytes()
	if err != nil || unsafe.SliceData(b) != unsafe.SliceData(p) || cap(b) != 4 {
		t.Fatalf("Bytes = %v (cap %d), %v: not the adopted buffer, or reaching past it", b, cap(b), err)
	}
	if err := w.Adopt(p); !errors.Is(err, messages.ErrInternal) {
		t.Fatalf("adopted twice: %v", err)
	}
}
