package fetchrun

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

func newIntoFixture(t *testing.T, capacity int64, deadline time.Duration) *protoFixture {
	now := time.Unix(1000, 0)
	p := NewFetchInto(storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "me"},
		Rand: rand.New(rand.NewPCG(1, 2))}, "x", capacity, now.Add(deadline), nil)
	return &protoFixture{t: t, p: p, store: objstore.NewStore(1 << 20), now: now}
}

// noDirectoryNotice fails if out tells the directory of a copy or a
// transfer: a fetch into a caller's buffer keeps and claims nothing.
func noDirectoryNotice(t *testing.T, out storeproto.FetchOutput) {
	t.Helper()
	for _, s := range out.Sends {
		switch s.Msg.(type) {
		case *messages.FetchDone, *messages.FetchAborted, *messages.PublishLocation, *messages.UnpublishLocation, *messages.CancelLocate:
			t.Fatalf("a fetch into a buffer sent %T", s.Msg)
		}
	}
}

// A fetch into a caller's buffer asks with no_copy, streams the whole
// object into [0, size) and ends with its size, telling the directory
// nothing and leaving the store untouched.
func TestFetchIntoStreamsAndKeepsNoCopy(t *testing.T) {
	f := newIntoFixture(t, 1000, time.Minute)
	l := f.locate(f.p.Start(f.now))
	if !l.GetNoCopy() {
		t.Fatalf("Locate %v: want no_copy", l)
	}
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 600, Sender: sender("s"),
		SenderState: messages.LocationState_COMPLETE}, f.now)
	if c := out.Stream; c == nil || f.p.Writer() != nil || c.Offset != 0 || c.Size != 600 || c.Sender.GetNodeId() != "s" || watched(out) != "s" {
		t.Fatalf("stream command %+v", out)
	}
	out = f.p.IntoStreamEnded(out.Stream.ID, 600, nil, f.now)
	noDirectoryNotice(t, out)
	if !out.Done || out.Err != nil || out.Size != 600 || out.Local || unwatched(out) != "s" {
		t.Fatalf("end %+v", out)
	}
	if f.store.Lookup("x") != nil || f.store.Used() != 0 {
		t.Fatal("the store holds something of x")
	}
}

// A stream that reports success short of the size is not a success.
func TestFetchIntoShortStreamIsNotSuccess(t *testing.T) {
	f := newIntoFixture(t, 1000, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 600, Sender: sender("s")}, f.now)
	out = f.p.IntoStreamEnded(out.Stream.ID, 500, nil, f.now)
	if out.Done {
		t.Fatalf("a short stream ended the fetch: %+v", out)
	}
	if l2 := f.locate(out); l2.GetFailedSender().GetNodeId() != "s" {
		t.Fatalf("want a Locate naming s failed, got %v", l2)
	}
}

// A buffer smaller than the object fails INVALID_ARGUMENT naming both
// sizes, before any byte moves; so does an inline object.
func TestFetchIntoBufferTooSmall(t *testing.T) {
	for _, inline := range []bool{false, true} {
		f := newIntoFixture(t, 99, time.Minute)
		l := f.locate(f.p.Start(f.now))
		reply := &messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("s")}
		if inline {
			reply = &messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, HasInline: true, InlineData: make([]byte, 100)}
		}
		out := f.p.Located(reply, f.now)
		noDirectoryNotice(t, out)
		if !out.Done || out.Stream != nil || !errors.Is(out.Err, messages.ErrInvalidArgument) {
			t.Fatalf("inline %v: %+v", inline, out)
		}
		if msg := out.Err.Error(); !strings.Contains(msg, "100 bytes") || !strings.Contains(msg, "only 99") {
			t.Fatalf("the error names not both sizes: %s", msg)
		}
	}
}

// Inline bytes are handed to the shell; a sender that is this node says
// the object is local.
func TestFetchIntoInlineAndLocal(t *testing.T) {
	f := newIntoFixture(t, 100, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 3, HasInline: true, InlineData: []byte("abc")}, f.now)
	if !out.Done || out.Err != nil || string(out.Inline) != "abc" || out.Size != 3 {
		t.Fatalf("inline: %+v", out)
	}
	f = newIntoFixture(t, 100, time.Minute)
	l = f.locate(f.p.Start(f.now))
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 50, Sender: &messages.NodeRef{NodeId: "me"}}, f.now)
	if !out.Done || out.Err != nil || !out.Local || out.Stream != nil {
		t.Fatalf("local: %+v", out)
	}
}

// A sender that fails mid-transfer is replaced from the offset the
// buffer holds; a Reduce that re-created the object (a new epoch) starts
// it over from 0; RESET from the sender starts over too.
func TestFetchIntoResumesAfterSenderFailure(t *testing.T) {
	f := newIntoFixture(t, 1000, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 1000, Sender: sender("a"), Epoch: 1}, f.now)
	if cut := f.p.SenderFailed("a"); cut.Cut != out.Stream.ID {
		t.Fatalf("sender failure did not cut the stream: %+v", cut)
	}
	out = f.p.IntoStreamEnded(out.Stream.ID, 400, messages.Errorf(messages.ErrorCode_CANCELED, "cut"), f.now)
	if out.Failure() == nil || out.Failure().Offset != 400 {
		t.Fatalf("failure %+v", out)
	}
	l = f.locate(out)
	if l.GetFailedSender().GetNodeId() != "a" || !l.GetNoCopy() {
		t.Fatalf("relocate %v", l)
	}
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 1000, Sender: sender("b"), Epoch: 1}, f.now)
	if out.Stream == nil || out.Stream.Offset != 400 || out.Switched() == nil || out.Switched().Offset != 400 {
		t.Fatalf("resume %+v", out)
	}
	out = f.p.IntoStreamEnded(out.Stream.ID, 700, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "b failed"), f.now)
	l = f.locate(out)
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 1000, Sender: sender("c"), Epoch: 2}, f.now)
	if out.Stream == nil || out.Stream.Offset != 0 {
		t.Fatalf("a new epoch must start from 0: %+v", out)
	}
	out = f.p.IntoStreamEnded(out.Stream.ID, 300, messages.Errorf(messages.ErrorCode_RESET, "rewound"), f.now)
	l = f.locate(out)
	if l.GetFailedSender() != nil {
		t.Fatalf("a RESET names no failed sender: %v", l)
	}
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 1000, Sender: sender("c"), Epoch: 2}, f.now)
	if out.Stream == nil || out.Stream.Offset != 0 {
		t.Fatalf("after RESET: %+v", out)
	}
	if out := f.p.IntoStreamEnded(out.Stream.ID, 1000, nil, f.now); !out.Done || out.Err != nil || out.Size != 1000 {
		t.Fatalf("end %+v", out)
	}
}

// The deadline is the caller's: no grace past it, and a Locate that
// times out ends the fetch TIMEOUT without a CancelLocate (the shard's
// no-copy waiter ends by the same deadline); the directory's NOT_FOUND
// and LOST end it with those codes.
func TestFetchIntoErrorsAreTheDirectorys(t *testing.T) {
	f := newIntoFixture(t, 100, 50*time.Millisecond)
	out := f.p.Start(f.now)
	f.locate(out)
	f.now = out.Timers[0].At
	out = f.p.Timer(out.Timers[0].Msg.(storeproto.FetchTimer), f.now)
	noDirectoryNotice(t, out)
	if !out.Done || !errors.Is(out.Err, messages.ErrTimeout) {
		t.Fatalf("timeout %+v", out)
	}
	for _, code := range []messages.ErrorCode{messages.ErrorCode_LOST, messages.ErrorCode_DELETED, messages.ErrorCode_NOT_FOUND} {
		f := newIntoFixture(t, 100, time.Minute)
		l := f.locate(f.p.Start(f.now))
		out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Error: messages.Errorf(code, "x")}, f.now)
		if !out.Done || !errors.Is(out.Err, &messages.Error{Code: code}) {
			t.Fatalf("%v: %+v", code, out)
		}
	}
}

// Stop (the caller gave up, or the node stops) cuts the running stream
// and ends the fetch CANCELED; the stream's late end changes nothing.
func TestFetchIntoStop(t *testing.T) {
	f := newIntoFixture(t, 100, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("s")}, f.now)
	stop := f.p.Stop()
	if stop.Cut != out.Stream.ID || !stop.Done || !errors.Is(stop.Err, messages.ErrCanceled) {
		t.Fatalf("stop %+v", stop)
	}
	if late := f.p.IntoStreamEnded(out.Stream.ID, 100, nil, f.now); late.Done || late.Stream != nil || len(late.Sends) != 0 {
		t.Fatalf("a stream end after Stop acted: %+v", late)
	}
}
