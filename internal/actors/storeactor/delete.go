package storeactor

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// deleteRun is one storeproto.Deletion and what its shell holds for it.
type deleteRun struct {
	del   *storeproto.Deletion
	timer *time.Timer
	// local is this node's copy of the object when the Delete started
	// (nil: none), which storeproto.DeleteStep.DropHeld may drop.
	local *objstore.Object
}

// deleteRoute names where one of a Delete's requests went: its shard
// (node "") or a node asked to drop its copy.
type deleteRoute struct {
	del  uint64
	pid  *actor.PID
	node string
}

func (n *StoreNode) delete(ctx actor.Context, m *messages.Delete) {
	id := m.GetObjectId()
	if err := n.validate(id); err != nil {
		if s := ctx.Sender(); s != nil {
			ctx.Send(s, &messages.DeleteReply{ObjectId: id, Error: err})
		}
		return
	}
	did := n.reqs.newID()
	d := storeproto.NewDeletion(storeproto.DeleteRequest{ID: did, ObjectID: id, Self: n.cfg.Self, Requester: requester(ctx),
		Deadline: time.Now().Add(n.cfg.timeout(m.GetTimeoutMs()))})
	n.reqs.deletes[did] = &deleteRun{del: d, local: n.cfg.Store.Lookup(id)}
	n.deleteStep(ctx, did, storeproto.DeleteStart{})
}

// deleting is a Delete's Deletion with this node's part of each step
// done as it is stepped, before its Box is carried out: a step's
// NoteDeleted and DropLocal are the store's state.
type deleting struct {
	n   *StoreNode
	run *deleteRun
}

func (d deleting) Step(now time.Time, ev any) storeproto.DeleteStep {
	s := d.run.del.Step(now, ev)
	id := d.run.del.Request().ObjectID
	if s.NoteDeleted {
		d.n.noteDeleted(id)
	}
	if s.DropLocal != nil {
		d.n.cfg.Store.Remove(id, s.DropLocal)
	}
	if s.DropHeld != nil && d.run.local != nil {
		d.n.cfg.Store.RemoveObject(d.run.local, s.DropHeld)
	}
	return s
}

// deleteStep steps deletion did with ev on deleteDrive, and forgets it
// once it answered.
func (n *StoreNode) deleteStep(ctx actor.Context, did uint64, ev any) {
	run := n.reqs.deletes[did]
	if run == nil {
		return
	}
	s, carried := n.deleteDrive.Step(ctx, did, deleting{n: n, run: run}, ev)
	if !carried {
		return // the sends ended it (nobody to ask)
	}
	if s.Done {
		if run.timer != nil {
			run.timer.Stop()
		}
		delete(n.reqs.deletes, did)
		for rid, r := range n.reqs.routes {
			if r.del == did {
				delete(n.reqs.routes, rid)
			}
		}
		if s.Err != nil {
			n.cfg.Log.WithFields(logrus.Fields{"object": run.del.Request().ObjectID, "error": s.Err}).Debug("delete failed")
		}
	}
}

// newDeleteDriver wires the generic driver to the Delete protocol: its
// requests to the shard and to the nodes go by deleteAsk, the deadline
// comes back to this actor, and a Delete its sends ended carries out
// nothing more.
func (n *StoreNode) newDeleteDriver() *shell.Driver[uint64, any, storeproto.DeleteStep] {
	return &shell.Driver[uint64, any, storeproto.DeleteStep]{Ended: n.deleteEnded, Carrier: shell.Carrier[uint64]{
		Route: func(ctx actor.Context, did uint64, s outbox.Send) bool {
			switch to := s.To.(type) {
			case directory.ShardOf:
				n.deleteAsk(ctx, did, n.cfg.ShardFor(string(to)), "", s.Msg)
			case *messages.NodeRef:
				n.deleteAsk(ctx, did, to.PID(), to.GetNodeId(), s.Msg)
			default:
				return false
			}
			return true
		},
		Timer: func(ctx actor.Context, did uint64, t outbox.Timer) {
			if run := n.reqs.deletes[did]; run != nil {
				run.timer = shell.After(ctx, t.At, t.Msg)
			}
		},
	}}
}

// deleteEnded reports whether the Delete did is over (its sends can end
// it).
func (n *StoreNode) deleteEnded(did uint64) bool { return n.reqs.deletes[did] == nil }

// deleteAsk sends one of a Delete's requests, stamped with a request id
// its answer echoes, to a watched peer: a peer that stops before it
// answers counts as answered (a node) or fails the Delete (the shard).
func (n *StoreNode) deleteAsk(ctx actor.Context, did uint64, pid *actor.PID, node string, msg any) {
	if pid == nil {
		gone := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no actor to send %T to", msg)
		if node == "" {
			n.deleteStep(ctx, did, storeproto.DeleteFailed{Err: gone})
		} else {
			n.deleteStep(ctx, did, storeproto.DeleteDropped{Node: node})
		}
		return
	}
	rid := n.reqs.newID()
	switch m := msg.(type) {
	case *messages.DeleteObject:
		m.RequestId = rid
		if n.cfg.Delete != nil && pid.GetAddress() != ctx.Self().GetAddress() {
			n.reqs.routes[rid] = deleteRoute{del: did, pid: pid, node: node}
			n.deleteElsewhere(ctx, did, rid, pid, m)
			return
		}
	case *messages.DropObject:
		m.RequestId = rid
	}
	n.reqs.routes[rid] = deleteRoute{del: did, pid: pid, node: node}
	n.watch(ctx, pid)
	n.reqs.senders.Request(ctx, pid, msg)
}

// deleteReply routes an answer, the shard's or a node's, to its Delete.
func (n *StoreNode) deleteReply(ctx actor.Context, m *messages.DeleteObjectReply) {
	r, ok := n.reqs.routes[m.GetRequestId()]
	if !ok {
		return // its Delete is over
	}
	delete(n.reqs.routes, m.GetRequestId())
	if r.node == "" {
		n.deleteStep(ctx, r.del, m)
	} else {
		n.deleteStep(ctx, r.del, storeproto.DeleteDropped{Node: r.node})
	}
}

func (n *StoreNode) deleteTimedOut(ctx actor.Context, m storeproto.DeleteDeadline) {
	n.deleteStep(ctx, m.ID, m)
}

// deletePeerGone: the peer with PID key stopped. A node asked to drop
// its copy has none to serve; a shard will not answer.
func (n *StoreNode) deletePeerGone(ctx actor.Context, key string, gone *messages.Error) {
	for rid, r := range n.reqs.routes {
		if actorutil.Key(r.pid) != key {
			continue
		}
		delete(n.reqs.routes, rid)
		if r.node == "" {
			n.deleteStep(ctx, r.del, storeproto.DeleteFailed{Err: gone})
		} else {
			n.deleteStep(ctx, r.del, storeproto.DeleteDropped{Node: r.node})
		}
	}
}
