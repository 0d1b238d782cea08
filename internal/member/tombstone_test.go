package member

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// idInShard returns an object id with prefix that directory shard j of
// count owns.
func idInShard(t *testing.T, prefix string, j, count int) string {
	t.Helper()
	for i := 0; i < 1<<16; i++ {
		if id := fmt.Sprintf("%s-%d", prefix, i); directory.ShardIndex(id, count) == j {
			return id
		}
	}
	t.Fatalf("no id with prefix %q in shard %d of %d", prefix, j, count)
	return ""
}

// deletedObject is an object the tests delete, and one in the same shard
// that they keep.
type deletedObject struct {
	id, kept   string
	data, keep []byte
}

// putGetDelete creates an object on creator, copies it to reader, deletes
// it from deleter, and puts a kept object into the same shard.
func putGetDelete(t *testing.T, ctx context.Context, l *Local, shard int, size int, creator, reader, deleter int) deletedObject {
	t.Helper()
	o := deletedObject{id: idInShard(t, fmt.Sprintf("deleted-%d", size), shard, l.cfg.Shards),
		kept: idInShard(t, fmt.Sprintf("kept-%d", size), shard, l.cfg.Shards),
		data: randomBytes(uint64(size), size), keep: randomBytes(uint64(size)+1, size)}
	if err := l.Client(creator).Put(ctx, o.id, o.data); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(reader).Get(ctx, o.id); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(deleter).Delete(ctx, o.id); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(creator).Put(ctx, o.kept, o.keep); err != nil {
		t.Fatal(err)
	}
	return o
}

// checkStillDeleted: after the shard was rebuilt, a Get of the deleted id
// fails with DELETED (without the deletion it would wait for its
// deadline), a Put of other bytes too, and the kept object is there.
func checkStillDeleted(t *testing.T, ctx context.Context, l *Local, o deletedObject, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		short, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := l.Client(i).Get(short, o.id)
		cancel()
		if !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("node-%d: Get of %s after the shard's rebuild: %v, want DELETED", i, o.id, err)
		}
	}
	for _, i := range nodes {
		if err := l.Client(i).Put(ctx, o.id, []byte(fmt.Sprintf("other bytes from node %d", i))); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("node-%d: Put of %s after the shard's rebuild: %v, want DELETED", i, o.id, err)
		}
		if err := l.Client(i).Put(ctx, o.id, o.data); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("node-%d: Put of %s's old bytes after the shard's rebuild: %v, want DELETED", i, o.id, err)
		}
		got, err := l.Client(i).Get(ctx, o.kept)
		if err != nil || string(got) != string(o.keep) {
			t.Fatalf("node-%d: Get of %s (kept): %v", i, o.kept, err)
		}
	}
}

// A directory shard that crashes restarts empty; the store nodes give it
// back the ids they saw deleted, so they stay deleted (large objects,
// which have copies, and inline ones). Twice: what the rebuilt shard
// learned survives the next crash too.
func TestDeletedIDsSurviveShardCrash(t *testing.T) {
	l := start(t, Config{Nodes: 3, hooks: testhooks.Set{Shard: shardCrashHook}})
	evs := recordEvents(t, l)
	ctx := deadline(t, 60*time.Second)
	const shard = 1
	objs := []deletedObject{
		putGetDelete(t, ctx, l, shard, 300<<10, 0, 1, 2),
		putGetDelete(t, ctx, l, shard, 100, 2, 0, 2),
	}
	for round := 1; round <= 2; round++ {
		sendIn(l, l.Shard(shard), crashShard{})
		eventually(t, 5*time.Second, "the shard restarted", func() bool { return len(eventsOf[*events.ShardRebuilt](evs)) >= round })
		for _, o := range objs {
			checkStillDeleted(t, ctx, l, o, 0, 1, 2)
		}
	}
}

// A shard whose host is killed moves to a live node, starts empty there,
// and learns the deletions from the survivors.
func TestDeletedIDsSurviveShardMove(t *testing.T) {
	l := start(t, Config{Nodes: 4})
	ctx := deadline(t, 60*time.Second)
	const victim = 3 // hosts shard 3 of 4
	// Copies on nodes 0 and 1, deleted from 2; deleted where it was
	// created; deleted from the victim itself (the creator still knows).
	objs := []deletedObject{
		putGetDelete(t, ctx, l, victim, 300<<10, 0, 1, 2),
		putGetDelete(t, ctx, l, victim, 200<<10, 1, 1, 1),
		putGetDelete(t, ctx, l, victim, 100, 2, 0, victim),
	}
	if err := l.Kill(victim); err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		checkStillDeleted(t, ctx, l, o, 0, 1, 2)
	}
}

// Which store nodes remember a deletion: the one that issued it and those
// whose copies the directory dropped as deleted; not a node that was not
// involved, and not a node whose copy was dropped for another cause.
func TestStoreNodesRememberTheDeletionsTheySaw(t *testing.T) {
	l := start(t, Config{Nodes: 4})
	ctx := deadline(t, 30*time.Second)
	if err := l.Client(0).Put(ctx, "x", randomBytes(60, 200<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(1).Get(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(2).Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	l.System().Root.Send(l.StoreNode(3), &messages.DropObject{ObjectId: "y"})
	remembers := func(i int, id string) bool { return slices.Contains(l.Store(i).DeletedIDs(), id) }
	eventually(t, 5*time.Second, "nodes 0, 1 and 2 remember x", func() bool { return remembers(0, "x") && remembers(1, "x") && remembers(2, "x") })
	// Node 3 handled its drop of y (messages to one actor are ordered)
	// once it answered this Get.
	if _, err := l.Client(3).Get(ctx, "x"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("get after delete: %v", err)
	}
	if ids := l.Store(3).DeletedIDs(); len(ids) != 0 {
		t.Fatalf("node-3 remembers %v", ids)
	}
}
