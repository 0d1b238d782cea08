package bench

import (
	"errors"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/messages"
)

func TestRoutesOptionsRefused(t *testing.T) {
	for _, c := range []struct {
		o    RoutesOptions
		want string
	}{
		{RoutesOptions{}, "binary"},
		{RoutesOptions{Binary: "hoplite", Size: -1}, "size"},
		{RoutesOptions{Binary: "hoplite", Size: 5 << 30}, "size"},
		{RoutesOptions{Binary: "hoplite", Reps: -1}, "reps"},
	} {
		if _, err := RunRoutes(t.Context(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.o, err, c.want)
		}
	}
}

// A Put's or a Get's reply error is the error; another reply is one too.
func TestRouteReplyErr(t *testing.T) {
	if err := replyErr(&messages.GetReply{}); err != nil {
		t.Errorf("a reply without an error: %v", err)
	}
	if err := replyErr(&messages.PutReply{Error: &messages.Error{Code: messages.ErrorCode_CAPACITY}}); !errors.Is(err, messages.ErrCapacity) {
		t.Errorf("a CAPACITY reply: %v", err)
	}
	if err := replyErr(&messages.DeleteReply{}); err == nil {
		t.Error("a reply of another type: no error")
	}
	w := &sliceWriter{buf: make([]byte, 3)}
	if _, err := w.Write([]byte("abcd")); err == nil {
		t.Error("4 bytes into 3: no error")
	}
	if err := checkBytes("x", []byte("ab"), 2, fingerprint.Of([]byte("ab"))); err != nil {
		t.Error(err)
	}
	if err := checkBytes("x", []byte("ac"), 2, fingerprint.Of([]byte("ab"))); err == nil {
		t.Error("other bytes: no error")
	}
}
