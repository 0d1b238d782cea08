package fetchrun

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/hoplite-go/hoplite/messages"
)

// An inline answer's bytes become the object's own buffer: the fetch
// stores them without a copy (the data plane's read into the answer was
// the one copy on this member), and a read-only Get hands out that very
// buffer, with no copy either.
func TestFetchStoresInlineBytesWithoutACopy(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	answer := bytes.Repeat([]byte("inline"), 100)
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: int64(len(answer)),
		HasInline: true, InlineData: answer}, f.now)
	if !out.Done || out.Err != nil {
		t.Fatalf("inline answer: %+v", out)
	}
	got, err := f.obj.Bytes()
	if err != nil || !bytes.Equal(got, answer) {
		t.Fatalf("stored %q, %v", got, err)
	}
	if unsafe.SliceData(got) != unsafe.SliceData(answer) {
		t.Fatal("the inline bytes were copied into the store")
	}
	if cap(got) != len(answer) {
		t.Fatalf("the object's buffer reaches past its bytes: cap %d of %d", cap(got), len(answer))
	}
}
