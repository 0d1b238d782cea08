package member

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// Wait on an embedded cluster: the first k of a set, what exists at the
// deadline without an error, an early answer when deleted ids leave
// fewer than k possible, and typed errors for bad arguments.
func TestWaitEmbedded(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	c := l.Client(1)
	ctx := deadline(t, 60*time.Second)
	if err := l.Client(0).Put(ctx, "w-a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	ready, notReady, err := c.Wait(ctx, []string{"w-b", "w-a", "w-c"}, 1)
	if err != nil || len(ready) != 1 || ready[0] != "w-a" || len(notReady) != 2 || notReady[0] != "w-b" || notReady[1] != "w-c" {
		t.Fatalf("wait for 1: ready %v, not ready %v, %v; want [w-a], [w-b w-c]", ready, notReady, err)
	}
	short, cancel := contextWithTimeout(ctx, 300*time.Millisecond)
	ready, notReady, err = c.Wait(short, []string{"w-a", "w-b", "w-c"}, 2)
	cancel()
	if err != nil || len(ready) != 1 || len(notReady) != 2 {
		t.Fatalf("wait for 2 of which 1 exists, until a deadline: ready %v, not ready %v, %v", ready, notReady, err)
	}
	done := make(chan error, 1)
	go func() {
		ready, _, err := c.Wait(ctx, []string{"w-a", "w-b", "w-c"}, 2)
		if err == nil && len(ready) != 2 {
			err = errors.New("not 2 ready")
		}
		done <- err
	}()
	if err := l.Client(2).Put(ctx, "w-c", []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("wait for 2, the second Put meanwhile: %v", err)
	}
	if err := c.Delete(ctx, "w-c"); err != nil {
		t.Fatal(err)
	}
	ready, notReady, err = c.Wait(ctx, []string{"w-c", "w-d"}, 2)
	if err != nil || len(ready) != 0 || len(notReady) != 2 {
		t.Fatalf("wait for 2 of a deleted id and one never put: ready %v, not ready %v, %v; want an answer at once, none ready",
			ready, notReady, err)
	}
	if ctx.Err() != nil {
		t.Fatal("the wait on a deleted id took until the test's deadline")
	}
	many := make([]string, storenode.MaxWaitObjects+1)
	for i := range many {
		many[i] = "id-" + string(rune('a'+i%26)) + time.Duration(i).String()
	}
	for _, bad := range []struct {
		ids []string
		k   int
	}{{many, 1}, {[]string{"x"}, 0}, {[]string{"x"}, 2}, {[]string{"x", "x"}, 1}, {[]string{""}, 1}} {
		if _, _, err := c.Wait(ctx, bad.ids, bad.k); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("wait for %d of %d ids: %v, want INVALID_ARGUMENT", bad.k, len(bad.ids), err)
		}
	}
	// The node checks too, for clients that do not.
	res, err := l.Member(0).System().Root.RequestFuture(c.PID(), &messages.WaitObjects{ObjectIds: many, NumReady: 1}, 10*time.Second).Result()
	if r, ok := res.(*messages.WaitObjectsReply); err != nil || !ok || r.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT ||
		!strings.Contains(r.GetError().GetMessage(), "at most 1024") {
		t.Fatalf("a WaitObjects of %d ids: %v %v, want INVALID_ARGUMENT", len(many), res, err)
	}
}
