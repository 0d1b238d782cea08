package directory

import (
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// What a table alone knows would die with it when its shard moves: the
// store nodes republish the copies they hold and the deletions they saw,
// but no node holds a copy of a lost object, nor remembers the deletion
// of an id that no node held, nor knows that a table of the shard forgot
// objects (it started over after a failure). The table sends these to a
// keeper (TableConfig.Keeper: its member's store node, which outlives
// the shard's move) as messages.Tombstones, and the keeper republishes
// them to the shard's next table with its own deletions. That table takes
// the lost ids once every store node has republished (a copy republished
// meanwhile, or a new Put, is the object alive again) and the amnesia at
// once: a shard once rebuilt after a failure stays amnesic wherever it
// moves, and a Delete of an object it never learned of succeeds instead
// of answering NOT_FOUND.

// carried is what earlier tables of the shard told this one through the
// store nodes' republication (see ApplyTombstones).
type carried struct {
	// lost are the ids an earlier table marked lost, taken at Republished.
	lost map[string]struct{}
	// forgot: an earlier table of the shard forgot objects (a keeper said
	// so), or this one let carried lost ids go past its bound.
	forgot bool
}

// Amnesic reports whether the table answers a Delete of an id it does
// not know as an amnesic one (TableConfig.Amnesic, or Forgot).
func (t *LocationTable) Amnesic() bool { return t.amnesic }

// Forgot reports whether the table knows that objects of its shard were
// forgotten beyond what TableConfig.Amnesic says: an earlier table's
// keeper said so, or it let carried lost ids go past its bound. The
// shard's next table must then be amnesic too, which the shell tells its
// keeper.
func (t *LocationTable) Forgot() bool { return t.carry.forgot }

// keep sends what no store node would republish to the keeper.
func (t *LocationTable) keep(msg *messages.Tombstones) []outbox.Send {
	if t.cfg.Keeper == nil {
		return nil
	}
	return []outbox.Send{{To: t.cfg.Keeper, Msg: msg}}
}

// carryLost takes lost ids an earlier table of the shard marked: before
// every store node has republished they wait (a copy may still come),
// after it they are taken at once. Past TombstoneLimit waiting ids the
// rest are not remembered and the table is amnesic instead: a Delete of
// one succeeds, a Get of one waits for its deadline.
func (t *LocationTable) carryLost(ids []string) []outbox.Send {
	var out []outbox.Send
	for _, id := range ids {
		if ValidateObjectID(id, t.cfg.MaxObjectIDLen) != nil {
			continue
		}
		if t.republished {
			out = append(out, t.takeLost(id)...)
			continue
		}
		if t.carry.lost == nil {
			t.carry.lost = map[string]struct{}{}
		}
		if len(t.carry.lost) >= t.cfg.TombstoneLimit {
			t.amnesic, t.carry.forgot = true, true
			continue
		}
		t.carry.lost[id] = struct{}{}
	}
	return out
}

// takeCarriedLost takes the lost ids that waited for Republished, in id
// order.
func (t *LocationTable) takeCarriedLost() []outbox.Send {
	ids := make([]string, 0, len(t.carry.lost))
	for id := range t.carry.lost {
		ids = append(ids, id)
	}
	t.carry.lost = nil
	slices.Sort(ids)
	var out []outbox.Send
	for _, id := range ids {
		out = append(out, t.takeLost(id)...)
	}
	return out
}

// takeLost marks id lost as an earlier table had, unless this one knows
// better: it is deleted or lost already, a copy of it was republished or
// created since (the object lives again), or a Reduce produces it. Its
// parked Gets fail with LOST.
func (t *LocationTable) takeLost(id string) []outbox.Send {
	if _, gone := t.tombstones[id]; gone {
		return nil
	}
	if _, ok := t.lost[id]; ok {
		return nil
	}
	e := t.entries[id]
	if e != nil && (e.known || e.target.reserved() || len(e.locs) > 0) {
		return nil
	}
	if e == nil {
		e = t.entry(id)
	}
	return t.markLost(e, messages.Errorf(messages.ErrorCode_LOST,
		"object %q is lost: no complete copy remained when its directory shard moved here, and none was republished since; Put it again to re-create it", id))
}
