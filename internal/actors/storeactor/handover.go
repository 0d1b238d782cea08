package storeactor

import (
	"slices"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// A shard's next table learns what only the former table knew from the
// former host's store node, its Keeper (kept.go). When a member rejoins
// and takes a shard back, its table asks every store node to republish
// at once, and the former host's store node may answer before its own
// member has seen the rejoin and stopped the former table: what that
// table marks lost afterwards, or held in doubt as it stopped (the
// creator of an object was killed moments before, and a receiver's copy
// might have been whole), reached the Keeper too late, and the new
// table, which is not amnesic, answered a Delete of the object NOT_FOUND
// (network nemesis seeds 560060, 570004, 570115). So while this member
// still hosts a requested shard, the answer to another member's table
// waits for that table's hand-over (shardactor.TableHandedOver), and
// then carries what the Keeper holds for the shard, hand-over included.

// DefaultHandoverWait is Config.HandoverWait's default, the bound of
// that wait. A member learns of a rejoin within its membership's
// detection, well inside this; a former host that never stops its table
// (its view still places the shard there) costs the asking table this
// long, and the asking table is told to be amnesic: it cannot know what
// the former table still knows.
const DefaultHandoverWait = 5 * time.Second

// handoverDue ends a heldRepublish's wait for hand-overs.
type handoverDue struct{ h *heldRepublish }

// hostedFor are the shards of a Republish that a table on this member
// still hosts, asked by another table (the shard's next home by another
// member's view): the answer waits for their hand-over. A request from
// the hosted table itself, or a tell, waits for nothing.
func (n *StoreNode) hostedFor(ctx actor.Context, shards []int32) []int32 {
	asker := ctx.Sender()
	if asker == nil {
		return nil
	}
	var hosted []int32
	for _, s := range shards {
		if t := n.kept.hosting[s]; t != nil && !actorutil.SentBy(asker, t) && !slices.Contains(hosted, s) {
			hosted = append(hosted, s)
		}
	}
	return hosted
}

// handedOver takes a table's hand-over: its ids in doubt are kept as
// lost, and every republication waiting for it gets what the Keeper
// holds for the shard now.
func (n *StoreNode) handedOver(ctx actor.Context, m shardactor.TableHandedOver) {
	if t := n.kept.hosting[m.Shard]; t != nil && t.Equal(m.Table) {
		delete(n.kept.hosting, m.Shard)
	}
	if len(m.LostIDs) > 0 {
		n.keep(&messages.Tombstones{LostIds: m.LostIDs})
		n.cfg.Log.WithFields(logrus.Fields{"shard": m.Shard, "ids": len(m.LostIDs)}).Info("a directory shard handed over objects in doubt as lost")
	}
	for _, h := range n.held {
		if h.shards[m.Shard] {
			delete(h.shards, m.Shard)
			n.republishDeletedTo(ctx, h.asker, map[int]bool{int(m.Shard): true}, h.count)
		}
	}
	n.endHeld(ctx, false)
}

// handoverDue ends h's wait for hand-overs that did not come.
func (n *StoreNode) handoverDue(ctx actor.Context, m *handoverDue) {
	m.h.handover = nil // shards a repeated request adds get a wait of their own
	n.handoverMissed(ctx, m.h)
	n.endHeld(ctx, false)
}

// handoverMissed tells h's asker to be amnesic for each shard whose
// hand-over it still waits for, with what the Keeper holds for it. At a
// cluster's formation this is routine: a member that placed shards
// before its view held every member asks for shards another member
// rightly hosts, and stops those tables moments later (the answer then
// reaches no one).
func (n *StoreNode) handoverMissed(ctx actor.Context, h *heldRepublish) {
	if len(h.shards) == 0 {
		return
	}
	for s := range h.shards {
		n.republishDeletedTo(ctx, h.asker, map[int]bool{int(s): true}, h.count)
		ctx.Send(h.asker, &messages.Tombstones{Amnesic: true, Shard: s})
	}
	n.cfg.Log.WithFields(logrus.Fields{"shards": len(h.shards), "asker": h.asker.GetAddress()}).
		Info("directory shards hosted here were still running when another member's table of them asked to be republished: that table starts amnesic")
	clear(h.shards)
}
