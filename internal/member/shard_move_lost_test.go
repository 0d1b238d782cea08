package member

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// Objects are lost while their shard lives on a survivor (their creator,
// their only holder, is killed); then the shard moves back to the member
// that rejoined, at that member's first placement, where no former owner
// is known. The table there learnt nothing of the losses: a Delete of a
// lost object answered NOT_FOUND (network nemesis seed 111) and a Get of
// one waited for its deadline instead of answering LOST. The survivor's
// store node keeps what its shard marked lost and republishes it to the
// shard's new home.
func TestLostObjectsFollowTheirShardBackToARejoinedMember(t *testing.T) {
	const nodes = 4
	const victim = 3
	probe, shards := idOnNodeAcrossRestart("lostback", victim, nodes)
	j := directory.ShardIndex(probe, shards)
	l := start(t, Config{Nodes: nodes, Shards: shards, Log: faultLog()})
	ctx := deadline(t, 90*time.Second)
	if err := l.Kill(victim); err != nil {
		t.Fatal(err)
	}
	interim := l.Member(0).ShardOwner(probe)
	creator := -1
	var others []int
	for k := range victim {
		if creator < 0 && l.Member(k).ID() != interim {
			creator = k
		} else {
			others = append(others, k)
		}
	}
	const n = 6
	deleted, read := make([]string, n), make([]string, n)
	for k := range n {
		deleted[k] = idInShard(t, fmt.Sprintf("lostback-deleted-%d", k), j, shards)
		read[k] = idInShard(t, fmt.Sprintf("lostback-read-%d", k), j, shards)
		for _, id := range []string{deleted[k], read[k]} {
			// Above the inline limit: the shard holds no bytes of it.
			if err := l.Client(creator).Put(ctx, id, randomBytes(uint64(k), 96<<10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Kill(creator); err != nil {
		t.Fatal(err)
	}
	get := func(via int, id string, within time.Duration) error {
		gctx, cancel := context.WithTimeout(ctx, within)
		defer cancel()
		_, err := l.Client(via).Get(gctx, id)
		return err
	}
	for _, id := range append(append([]string(nil), deleted...), read...) {
		if err := get(others[0], id, 10*time.Second); !errors.Is(err, messages.ErrLost) {
			t.Fatalf("Get of %q after its only holder was killed: %v, want LOST", id, err)
		}
	}
	if owner := l.Member(others[0]).ShardOwner(probe); owner != interim {
		t.Fatalf("shard %d moved to %s when the creator was killed, want it on %s still", j, owner, interim)
	}
	if err := l.Restart(victim); err != nil {
		t.Fatal(err)
	}
	if owner, want := l.Member(others[0]).ShardOwner(probe), l.Member(victim).ID(); owner != want {
		t.Fatalf("shard %d is on %s after the restart, want %s (the rejoined member)", j, owner, want)
	}
	for k, id := range deleted {
		for {
			err := l.Client(others[k%len(others)]).Delete(ctx, id)
			if err == nil {
				break
			}
			if !errors.Is(err, messages.ErrUnavailable) || ctx.Err() != nil {
				t.Fatalf("Delete of %q, lost before its shard moved back: %v, want OK", id, err)
			}
		}
	}
	for _, id := range read {
		if err := get(victim, id, 10*time.Second); !errors.Is(err, messages.ErrLost) {
			t.Fatalf("Get of %q, lost before its shard moved back: %v, want LOST", id, err)
		}
	}
	for _, id := range deleted {
		if err := get(others[0], id, 10*time.Second); !errors.Is(err, messages.ErrDeleted) {
			t.Fatalf("Get of %q after its Delete: %v, want DELETED", id, err)
		}
	}
}
