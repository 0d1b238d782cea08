package barrieractor

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/internal/barrier/tree"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// treeFlush is a tree position's Flush timer; stale generations are
// ignored.
type treeFlush struct {
	name string
	gen  uint64
}

// treePlace is this host's position in one barrier's combining tree: the
// shell around a tree.Node. A host learns the tree from the first
// message that names it (a participant's BarrierTreeEnter, a child's
// first BarrierArrivals); one that lost it (restarted, or evicted it)
// drops what comes for it, and the participants' re-asks go straight to
// the replicas.
type treePlace struct {
	name    string
	wire    *messages.BarrierTreeShape
	shape   *tree.Shape
	pids    []*actor.PID
	node    *tree.Node
	told    bool            // the parent has the shape
	reached map[string]bool // participants this position sent an outcome
	senders actorutil.Senders
	timer   *time.Timer
	gen     uint64
}

// treePlaces are a host's positions, at most max (the oldest goes).
type treePlaces struct {
	byName map[string]*treePlace
	fifo   []string
	max    int
}

func (t *treePlaces) get(name string) *treePlace { return t.byName[name] }

func (t *treePlaces) add(p *treePlace) {
	if t.byName == nil {
		t.byName = map[string]*treePlace{}
	}
	for len(t.fifo) > 0 && len(t.byName) >= t.max {
		if old := t.byName[t.fifo[0]]; old != nil {
			old.stop()
			delete(t.byName, t.fifo[0])
		}
		t.fifo = t.fifo[1:]
	}
	t.byName[p.name] = p
	t.fifo = append(t.fifo, p.name)
}

func (t *treePlaces) stopAll() {
	for _, p := range t.byName {
		p.stop()
	}
	t.byName, t.fifo = nil, nil
}

func (p *treePlace) stop() {
	p.gen++
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	p.senders.Close()
}

// place is this host's position in barrier name's tree, made from wire
// if it has none yet (nil: none, and wire does not place this host).
func (h *Host) place(ctx actor.Context, name string, wire *messages.BarrierTreeShape) *treePlace {
	if p := h.trees.get(name); p != nil || wire == nil {
		return p
	}
	if replica.CheckName(name) != nil || len(wire.GetHosts()) < 2 || wire.GetMax() < 1 || len(wire.GetReplicas()) < 1 ||
		len(wire.GetReplicas()) > replica.MaxReplicas {
		return nil
	}
	n := len(wire.GetHosts())
	names, pids, self := make([]string, n), make([]*actor.PID, n), -1
	for i, peer := range wire.GetHosts() {
		pid := replica.PeerPID(peer)
		if pid == nil {
			return nil
		}
		pids[i], names[i] = pid, pid.String()
		if pid.Equal(ctx.Self()) {
			self = i
		}
	}
	shape, err := tree.NewShape(names, int(wire.GetFanout()))
	if err != nil || self < 0 {
		return nil
	}
	// Every position passes on at once what reached it together (one
	// message per mailbox's worth): how many participants enter at each
	// member is not known (their labels' hash decides), and a position
	// that held out for a share it never got would cost the last
	// arrival a linger. Only the root's count is known, the barrier's
	// Max: on a barrier that fires on its last entry alone, the root
	// holds until all are in and the replicas take them in one message.
	cfg := tree.Config{Name: name, Shape: shape, Self: self, Mode: tree.AtOnce, Max: int(wire.GetMax()), Coalesce: true}
	if wire.GetHold() {
		cfg.Mode, cfg.Expect = tree.Hold, make([]int, n)
		cfg.Expect[0] = int(wire.GetMax())
	}
	node, err := tree.NewNode(cfg)
	if err != nil {
		return nil
	}
	p := &treePlace{name: name, wire: wire, shape: shape, pids: pids, node: node, reached: map[string]bool{}}
	h.trees.add(p)
	return p
}

// treeEnter is a participant's first Enter of a label, at its leaf.
func (h *Host) treeEnter(ctx actor.Context, m *messages.BarrierTreeEnter) {
	e, from := m.GetEnter(), ctx.Sender()
	p := h.place(ctx, e.GetName(), m.GetShape())
	if p == nil || from == nil || int(m.GetLeaf()) != p.node.Self() {
		return
	}
	h.treeStep(ctx, p, tree.Enter{Label: e.GetLabel(), Host: e.GetHost(), Reply: replica.Peer(from), RequestID: e.GetRequestId()})
}

// treeArrivals is a child's combined arrivals.
func (h *Host) treeArrivals(ctx actor.Context, m *messages.BarrierArrivals) {
	if p := h.place(ctx, m.GetName(), m.GetShape()); p != nil {
		h.treeStep(ctx, p, m)
	}
}

// treeReleases is the parent's outcomes, or the primary manager's (from
// -1) at the root.
func (h *Host) treeReleases(ctx actor.Context, m *messages.BarrierReleases) {
	p := h.trees.get(m.GetName())
	if p == nil {
		return
	}
	if m.GetFrom() < 0 {
		h.treeStep(ctx, p, tree.Release{Outcomes: m.GetOutcomes()})
		return
	}
	h.treeStep(ctx, p, m)
}

func (h *Host) treeFlushed(ctx actor.Context, f treeFlush) {
	if p := h.trees.get(f.name); p != nil && p.gen == f.gen {
		p.timer = nil
		h.treeStep(ctx, p, tree.Flush{})
	}
}

// treeUndelivered passes on an outcome that did not reach its
// participant to the replicas, whose primary reports the label failed.
func (h *Host) treeUndelivered(ctx actor.Context, target *actor.PID) {
	if target == nil {
		return
	}
	key := actorutil.Key(target)
	for _, p := range h.trees.byName {
		if !p.reached[key] {
			continue
		}
		for _, r := range p.wire.GetReplicas() {
			ctx.Send(replica.PeerPID(r), &messages.BarrierUndelivered{Name: p.name, Target: replica.Peer(target)})
		}
	}
}

// treeStep steps the position (the generic driver carries out its Box:
// treeDrive) and hands the root's arrivals to the replicas and the
// outcomes of participants that entered here to them.
func (h *Host) treeStep(ctx actor.Context, p *treePlace, ev any) {
	out, _ := treeDrive.Step(ctx, p, p.node, ev)
	if out.Err != nil {
		h.cfg.Log.WithFields(logrus.Fields{"barrier": p.name, "host": membername.Actor(ctx.Self())}).WithError(out.Err).Debug("barrier tree dropped a message")
		return
	}
	if len(out.Arrivals) > 0 {
		for rank, r := range p.wire.GetReplicas() {
			ctx.Send(replica.PeerPID(r), &messages.BarrierEnters{Name: p.name, ToRank: int32(rank), Arrivals: out.Arrivals})
		}
	}
	for _, o := range out.Local {
		msg, ok := outcomeMessage(p.name, o)
		to := replica.PeerPID(o.GetReply())
		if !ok || to == nil {
			continue
		}
		key := actorutil.Key(to)
		if !p.reached[key] && len(p.reached) >= int(p.wire.GetMax()) {
			continue // more participants than the barrier has labels
		}
		p.reached[key] = true
		// A request, so that a participant that is gone answers with a
		// dead letter naming it (treeUndelivered).
		p.senders.Request(ctx, to, msg)
	}
}

// enters routes the root's combined arrivals to the manager, or refuses
// each to its participant as a BarrierEnter would be.
func (h *Host) enters(ctx actor.Context, m *messages.BarrierEnters) {
	if pid := h.managers[m.GetName()]; pid != nil {
		ctx.Forward(pid)
		return
	}
	var err *messages.Error
	switch {
	case h.closed[m.GetName()]:
		err = messages.Errorf(messages.ErrorCode_DELETED, "barrier %q is closed", m.GetName())
	default:
		if err = replica.CheckName(m.GetName()); err == nil {
			err = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q", m.GetName())
		}
	}
	for _, a := range m.GetArrivals() {
		if to := replica.PeerPID(a.GetReply()); to != nil {
			ctx.Send(to, &messages.BarrierRefused{Name: m.GetName(), Label: a.GetLabel(), RequestId: a.GetRequestId(), FromRank: m.GetToRank(), Error: err})
		}
	}
}

// treeDrive carries out a tree position's Box: a send goes to the
// position its member name holds (the first arrivals carry the shape
// to the parent), and the one Flush a position arms replaces the one
// before, behind what the mailbox holds when it is due at once.
var treeDrive = &shell.Driver[*treePlace, any, tree.Output]{Carrier: shell.Carrier[*treePlace]{
	Route: func(ctx actor.Context, p *treePlace, s outbox.Send) bool {
		pos, ok := p.shape.Position(s.To.(string))
		if !ok {
			return true
		}
		if a, ok := s.Msg.(*messages.BarrierArrivals); ok && !p.told {
			a.Shape, p.told = p.wire, true
		}
		ctx.Send(p.pids[pos], s.Msg)
		return true
	},
	Timer: func(ctx actor.Context, p *treePlace, t outbox.Timer) {
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
		p.gen++
		f := treeFlush{name: p.name, gen: p.gen}
		if d := time.Until(t.At); d > 0 {
			sys, self := ctx.ActorSystem(), ctx.Self()
			p.timer = time.AfterFunc(d, func() { sys.Root.Send(self, f) })
		} else {
			// Due now: behind what the mailbox holds already.
			ctx.Send(ctx.Self(), f)
		}
	},
}}
