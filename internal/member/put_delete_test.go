package member

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// putHold holds node-0's Put of one id before the chunk at one offset
// until released; the test releases it at the latest when it ends, so a
// failing test never leaves a Put blocked.
type putHold struct {
	id      string
	off     int64
	reached chan struct{} // closed when the Put arrives at the chunk
	open    chan struct{}
	once    sync.Once
	arrive  sync.Once
}

func newPutHold(t *testing.T, id string, off int64) *putHold {
	h := &putHold{id: id, off: off, reached: make(chan struct{}), open: make(chan struct{})}
	t.Cleanup(h.release)
	return h
}

func (h *putHold) release() { h.once.Do(func() { close(h.open) }) }

func (h *putHold) hook(node, id string, off int64) {
	if node != "node-0" || id != h.id || off != h.off {
		return
	}
	h.arrive.Do(func() { close(h.reached) })
	select {
	case <-h.open:
	case <-time.After(60 * time.Second): // a safety net: cleanup releases it
	}
}

// answer returns what a Put or Get goroutine sent, failing the test at
// the deadline.
func answer(t *testing.T, put <-chan error, d time.Duration) error {
	t.Helper()
	select {
	case err := <-put:
		return err
	case <-time.After(d):
		t.Fatal("no answer")
		return nil
	}
}

// checkDeletedEverywhere asserts that id is gone for good: no store holds
// a copy (a Put that succeeded after the Delete must not leave its pinned
// copy behind), Gets fail with DELETED and a new Put of it too.
func checkDeletedEverywhere(t *testing.T, l *Local, id string, data []byte) {
	t.Helper()
	ctx := deadline(t, 10*time.Second)
	eventually(t, 5*time.Second, "every copy of "+id+" to be dropped", func() bool {
		for i := 0; i < l.Nodes(); i++ {
			if l.Store(i).Lookup(id) != nil {
				return false
			}
		}
		return true
	})
	for i := 0; i < l.Nodes(); i++ {
		if _, err := l.Client(i).Get(ctx, id); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("Get of the deleted %q on node %d: %v, want DELETED", id, i, err)
		}
	}
	if err := l.Client(0).Put(ctx, id, data); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Put of the deleted %q: %v, want DELETED", id, err)
	}
}

// TestPutSucceedsWhenConsumerDeletesBeforeReply: an object under the
// inline limit is readable from the directory as soon as the directory
// registered it, before its creator has copied it into its own store. A
// consumer that Gets it and Deletes it meanwhile drops the creator's copy
// under the Put; the Put did its job (the consumer read its bytes) and
// must answer success, not DELETED. The hold makes the Delete reach
// node-0 before the Put copies its only chunk.
func TestPutSucceedsWhenConsumerDeletesBeforeReply(t *testing.T) {
	hold := newPutHold(t, "v", 0)
	cfg := Config{Nodes: 2}
	cfg.hooks.Store.BeforePutChunk = hold.hook
	l := start(t, cfg)
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(31, 4<<10)

	put := make(chan error, 1)
	go func() { put <- l.Client(0).Put(ctx, "v", data) }()
	<-hold.reached // registered: the directory serves the bytes from here on
	got, err := l.Client(1).Get(ctx, "v")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get while the creator copies: %v (%d bytes)", err, len(got))
	}
	if err := l.Client(1).Delete(ctx, "v"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the Delete to drop node-0's copy", func() bool { return l.Store(0).Lookup("v") == nil })
	hold.release()
	if err := answer(t, put, 10*time.Second); err != nil {
		t.Fatalf("Put answered %v after a consumer read and deleted its object; want success", err)
	}
	checkDeletedEverywhere(t, l, "v", data)
}

// TestPutDeletedMidCopyFails: an object at or above the inline limit is
// readable only from its copies; deleted while the creator's copy is still
// filling, its bytes were never whole anywhere, so the Put fails with
// DELETED (and a Get that was streaming from the partial copy too).
func TestPutDeletedMidCopyFails(t *testing.T) {
	const chunk = 64 << 10
	hold := newPutHold(t, "m", 2*chunk)
	cfg := Config{Nodes: 2, ChunkSize: chunk}
	cfg.hooks.Store.BeforePutChunk = hold.hook
	l := start(t, cfg)
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(32, 4*chunk)

	put := make(chan error, 1)
	go func() { put <- l.Client(0).Put(ctx, "m", data) }()
	<-hold.reached // two of four chunks are in node-0's copy
	get := make(chan error, 1)
	go func() {
		_, err := l.Client(1).Get(ctx, "m")
		get <- err
	}()
	if err := l.Client(1).Delete(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "the Delete to drop node-0's copy", func() bool { return l.Store(0).Lookup("m") == nil })
	hold.release()
	if err := answer(t, put, 10*time.Second); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Put deleted mid-copy answered %v, want DELETED", err)
	}
	if err := answer(t, get, 10*time.Second); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get of an object deleted before it was whole: %v, want DELETED", err)
	}
	checkDeletedEverywhere(t, l, "m", data)
}

// A member dies together with an object's only copy and its directory
// shard: the rebuilt shard cannot know the object existed, and a Delete
// of it succeeds (the id is then DELETED everywhere) rather than claiming
// it never existed.
func TestDeleteAfterMemberAndShardDied(t *testing.T) {
	const nodes = 4
	l := start(t, Config{Nodes: nodes})
	ctx := deadline(t, 20*time.Second)
	id := idOnNode("gone", 2, nodes, nodes) // its shard on node-2
	if err := l.Client(2).Put(ctx, id, []byte("held by node-2 only")); err != nil {
		t.Fatal(err)
	}
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(0).Delete(ctx, id); err != nil {
		t.Fatalf("Delete of an object lost with its shard: %v", err)
	}
	if _, err := l.Client(1).Get(ctx, id); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get after the Delete: %v, want DELETED", err)
	}
}
