package fetchrun

import (
	"bytes"
	"testing"
	"time"
	"unsafe"

	"github.com/hoplite-go/hoplite/internal/storeproto"
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

// The shard's answer stepped bare (*messages.LocateReply, the form the
// store node's shell uses so that a Get boxes no event) is the same
// event as storeproto.FetchLocated: both complete the fetch with the
// answer's bytes, and a bare answer to another attempt is ignored as a
// stale FetchLocated is.
func TestBareLocateReplyIsFetchLocated(t *testing.T) {
	answer := []byte("inline bytes")
	for _, bare := range []bool{false, true} {
		f := newProtoFixture(t, time.Minute)
		attempt := f.locate(f.p.Start(f.now)).GetAttempt()
		step := func(attempt uint64) storeproto.FetchOutput {
			r := &messages.LocateReply{ObjectId: "x", Attempt: attempt, Size: int64(len(answer)), HasInline: true, InlineData: answer}
			if bare {
				return f.p.Step(f.now, r)
			}
			return f.p.Step(f.now, storeproto.FetchLocated{Reply: r})
		}
		if out := step(attempt + 1); out.Done || out.Store.Kind != 0 || len(out.Sends) != 0 {
			t.Fatalf("bare %v: a stale answer was acted on: %+v", bare, out)
		}
		if out := step(attempt); !out.Done || out.Err != nil {
			t.Fatalf("bare %v: the answer did not complete the fetch: %+v", bare, out)
		}
		if got, err := f.obj.Bytes(); err != nil || !bytes.Equal(got, answer) {
			t.Fatalf("bare %v: stored %q, %v", bare, got, err)
		}
	}
}
