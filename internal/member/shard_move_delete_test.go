package member

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// A shard moves back to a member that rejoined (a new incarnation of a
// killed one) and starts there empty, its objects' copies on their way
// from the store nodes. A Delete in that window found no entry and
// answered NOT_FOUND of an object that exists (and the object stayed
// readable). One store node's republication is held for a while to make
// the window wide: every Delete sent meanwhile answers OK, and the
// objects are gone after.
func TestDeleteWhileAShardMovesBackToARejoinedMember(t *testing.T) {
	const nodes = 4
	const victim = 3
	const slow = "node-2" // its store answers the moved shard's Republish late
	probe, shards := idOnNodeAcrossRestart("moveback", victim, nodes)
	j := directory.ShardIndex(probe, shards)
	var armed, holding atomic.Bool
	var holds atomic.Int64
	hold := func(node string, msg any) {
		if r, ok := msg.(*messages.Republish); ok && node == slow && armed.Load() && slices.Contains(r.GetShards(), int32(j)) {
			holds.Add(1)
			holding.Store(true)
			time.Sleep(300 * time.Millisecond)
			holding.Store(false)
		}
	}
	l := start(t, Config{Nodes: nodes, Shards: shards, Log: faultLog(), hooks: testhooks.Set{Store: storeactor.Hooks{BeforeReceive: hold}}})
	ctx := deadline(t, 60*time.Second)
	if err := l.Kill(victim); err != nil {
		t.Fatal(err)
	}
	// Objects of the shard while it lives on a survivor, inline and not,
	// each held by its creator only (a third of them by the slow node).
	const n = 300
	ids := make([]string, n)
	for k := range ids {
		ids[k] = idInShard(t, fmt.Sprintf("moveback-%d", k), j, shards)
		size := 1 << 10
		if k%2 == 1 {
			size = 96 << 10
		}
		if err := l.Client(k%victim).Put(ctx, ids[k], randomBytes(uint64(k), size)); err != nil {
			t.Fatal(err)
		}
	}
	armed.Store(true)
	done := make(chan error, 1)
	go func() { done <- l.Restart(victim) }()
	// The Deletes are spread over the restart and the move that follows,
	// from the nodes whose store is not held.
	var held int // Deletes under way while the republication was held
	for k, id := range ids {
		before, wasHolding := holds.Load(), holding.Load()
		for {
			err := l.Client(k%2).Delete(ctx, id)
			if err == nil {
				break
			}
			if errors.Is(err, messages.ErrNotFound) {
				t.Fatalf("Delete of %q (an object that exists) while its shard moved back: %v", id, err)
			}
			if !errors.Is(err, messages.ErrUnavailable) || ctx.Err() != nil {
				t.Fatalf("Delete of %q: %v", id, err)
			}
		}
		if wasHolding || holding.Load() || holds.Load() != before {
			held++
		}
		time.Sleep(2 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if held == 0 {
		t.Fatal("no Delete was under way while the slow store held its republication: the test missed the move")
	}
	if owner, want := l.Member(0).ShardOwner(probe), l.Member(victim).ID(); owner != want {
		t.Fatalf("shard %d is on %s after the restart, want %s (the rejoined member)", j, owner, want)
	}
	for k, id := range ids {
		if _, err := l.Client((k+1)%nodes).Get(ctx, id); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("Get of %q after its Delete: %v, want DELETED", id, err)
		}
	}
}
