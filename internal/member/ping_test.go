package member

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// PingData is a bare round trip on the data plane (the bench's data-rtt
// floor): any member answers it, in either direction; an address where no
// member listens is UNAVAILABLE, not a hang.
func TestPingData(t *testing.T) {
	l := start(t, Config{Nodes: 2})
	ctx := deadline(t, 10*time.Second)
	for _, c := range [][2]int{{0, 1}, {1, 0}} {
		if err := l.Member(c[0]).PingData(ctx, l.Member(c[1]).DataAddress()); err != nil {
			t.Fatalf("member %d to %d: %v", c[0], c[1], err)
		}
	}
	if err := l.Member(0).PingData(ctx, "127.0.0.1:1"); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a ping where nobody listens: %v, want UNAVAILABLE", err)
	}
}
