package storeactor

import (
	"container/list"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// kept is what the directory shards of this node's member told it to
// keep for their next tables (directory.TableConfig.Keeper): the ids they
// marked lost and that a table of a shard was amnesic. The deletions of
// ids no node held go to the store's own memory of deletions
// (objstore.Store.NoteDeleted). All of it is republished with the
// deletions, so a shard that moves from this member to another takes it
// along. It outlives restarts of the actor, as the store does.
type kept struct {
	lost    *list.List // ids, oldest first, at most maxKeptLost
	lostIdx map[string]*list.Element
	amnesic map[int32]bool // shards, at most maxKeptShards
	// forgot: ids were let go past a bound, so every shard's next table
	// is told it is amnesic.
	forgot bool
	// hosting are the tables that run on this member and have not handed
	// over yet (handover.go), by shard: at most one each.
	hosting map[int32]*actor.PID
}

// maxKeptLost bounds the lost ids kept (a directory table keeps as many,
// directory.TableConfig.TombstoneLimit's default); maxKeptShards the
// shards named amnesic. Past either, the oldest go and every shard's next
// table is amnesic instead: a Delete of an id it does not know succeeds,
// a Get of a forgotten lost id waits for its deadline instead of LOST.
const (
	maxKeptLost   = 1 << 16
	maxKeptShards = 1 << 12
)

func newKept() *kept {
	return &kept{lost: list.New(), lostIdx: map[string]*list.Element{}, amnesic: map[int32]bool{}, hosting: map[int32]*actor.PID{}}
}

// keep takes a shard's note.
func (n *StoreNode) keep(m *messages.Tombstones) {
	k := n.kept
	for _, id := range m.GetObjectIds() {
		if n.validate(id) == nil {
			n.cfg.Store.NoteDeleted(id)
		}
	}
	for _, id := range m.GetLostIds() {
		if n.validate(id) != nil || k.lostIdx[id] != nil {
			continue
		}
		k.lostIdx[id] = k.lost.PushBack(id)
		for k.lost.Len() > maxKeptLost {
			delete(k.lostIdx, k.lost.Remove(k.lost.Front()).(string))
			k.forgot = true
		}
	}
	if m.GetAmnesic() && !k.amnesic[m.GetShard()] {
		if len(k.amnesic) >= maxKeptShards {
			k.forgot = true
		} else {
			k.amnesic[m.GetShard()] = true
		}
	}
}

// keptFor adds what is kept for the wanted shards to their batches (see
// republishDeleted); add appends one lost id to its shard's batch.
func (n *StoreNode) keptFor(want map[int]bool, count int, add func(shard int, id string), batch func(shard int) *messages.Tombstones) {
	k := n.kept
	for e := k.lost.Front(); e != nil; e = e.Next() {
		id := e.Value.(string)
		if s := directory.ShardIndex(id, count); want[s] {
			add(s, id)
		}
	}
	for s := range want {
		if k.forgot || k.amnesic[int32(s)] {
			b := batch(s)
			b.Amnesic, b.Shard = true, int32(s)
		}
	}
}
