package shardactor

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// callerFunc is a transport.Caller from a func.
type callerFunc func(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error)

func (f callerFunc) Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	return f(ctx, addr, kind, req)
}

// CallLocate sends the Locate as a ControlLocate to the member's data
// address and decodes its answer; a failed call is its error, and an
// answer that does not decode is UNAVAILABLE.
func TestCallLocate(t *testing.T) {
	answer := func(b []byte, err error) callerFunc {
		return func(_ context.Context, addr string, kind byte, req []byte) ([]byte, error) {
			var l messages.Locate
			if addr != "m1:data" || kind != messages.ControlLocate || proto.Unmarshal(req, &l) != nil || l.GetAttempt() != 3 {
				t.Errorf("call to %q kind %q of %x", addr, kind, req)
			}
			return b, err
		}
	}
	l := &messages.Locate{ObjectId: "x", Attempt: 3, TimeoutMs: 1000}
	b, _ := proto.Marshal(&messages.LocateReply{ObjectId: "x", Attempt: 3, HasInline: true, InlineData: []byte("abc")})
	r, err := CallLocate(context.Background(), answer(b, nil), "m1:data", l)
	if err != nil || r.GetAttempt() != 3 || string(r.GetInlineData()) != "abc" {
		t.Fatalf("answered: %v, %v", r, err)
	}
	gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone")
	if _, err := CallLocate(context.Background(), answer(nil, gone), "m1:data", l); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("failed: %v", err)
	}
	if _, err := CallLocate(context.Background(), answer([]byte{0xff, 0xff}, nil), "m1:data", l); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("malformed: %v", err)
	}
}
