package processtest

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// The same for members of a multi-process cluster: the member hosting
// the shard is SIGKILLed, the shard moves to a survivor and learns the
// deletion from the members' store nodes.
func TestProcessDeletedIDSurvivesShardMove(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startNode(t, bin, s, seeds))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	a, b, victim := nodes[0], nodes[1], nodes[2]
	id := idOwnedBy(t, view, victim.id, "deleted")
	kept := idOwnedBy(t, view, victim.id, "kept")
	data, keep := randomBytes(21, 300<<10), randomBytes(22, 300<<10)
	putRetry(t, c.of(a), id, data)
	putRetry(t, c.of(a), kept, keep)
	getExact(t, c.of(b), id, data)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	err := c.of(b).Delete(ctx, id)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	c.converge(t, a, b)

	// A request that races the move fails UNAVAILABLE and is retried.
	retry := func(op func(cl *storenode.Client, ctx context.Context) error) error {
		end := time.Now().Add(20 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := op(c.of(a), ctx)
			cancel()
			if !errors.Is(err, messages.ErrUnavailable) || time.Now().After(end) {
				return err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if err := retry(func(cl *storenode.Client, ctx context.Context) error { _, err := cl.Get(ctx, id); return err }); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get of the deleted id after its shard moved: %v, want DELETED", err)
	}
	if err := retry(func(cl *storenode.Client, ctx context.Context) error { return cl.Put(ctx, id, []byte("other bytes")) }); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Put of the deleted id after its shard moved: %v, want DELETED", err)
	}
	getExact(t, c.of(b), kept, keep)
}
