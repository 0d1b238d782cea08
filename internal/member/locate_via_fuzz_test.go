package member

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// A member serves any peer's Locate through it as a deputy
// (ControlLocateVia): whatever the bytes, serveLocateVia answers with a
// LocateReply that decodes or fails with a typed error, a request that
// does not decode or names no object is INVALID_ARGUMENT, and the member
// still serves a good Get after it.
func FuzzServeLocateVia(f *testing.F) {
	n := &messages.NodeRef{NodeId: "n9"}
	for _, l := range []*messages.Locate{
		{ObjectId: "fuzz-good", Receiver: n, TimeoutMs: 1},
		{ObjectId: "fuzz-good", NoCopy: true},
		{ObjectId: "absent", Receiver: n, Attempt: 3},
		{ObjectId: "fuzz-good", FailedSender: n, FailedSenderLacks: true},
		{},
	} {
		b, _ := proto.Marshal(l)
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0xff})
	// Three embedded members, 2 deputy groups; node 0 is the deputy.
	l, err := StartLocal(Config{Nodes: 3, LocateDeputies: 2, Log: quietLog()})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(l.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := l.Client(1).Put(ctx, "fuzz-good", []byte("abc")); err != nil {
		f.Fatal(err)
	}
	m := l.Member(0)
	f.Fuzz(func(t *testing.T, req []byte) {
		// Short: a Locate of an absent object waits at its shard until
		// the deadline, and is then TIMEOUT.
		rctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		defer cancel()
		out, err := m.serveLocateVia(rctx, req)
		var e *messages.Error
		if err != nil && !errors.As(err, &e) {
			t.Fatalf("serveLocateVia(%x): untyped error %T %v", req, err, err)
		}
		var lr messages.Locate
		if (proto.Unmarshal(req, &lr) != nil || lr.GetObjectId() == "") && !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("serveLocateVia(%x): %v, want INVALID_ARGUMENT", req, err)
		}
		if err == nil && proto.Unmarshal(out, &messages.LocateReply{}) != nil {
			t.Fatalf("serveLocateVia(%x) answered %x, which does not decode", req, out)
		}
		gctx, gcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer gcancel()
		if got, err := l.Client(2).Get(gctx, "fuzz-good"); err != nil || string(got) != "abc" {
			t.Fatalf("a good Get after the fuzzed request: %q, %v", got, err)
		}
	})
}
