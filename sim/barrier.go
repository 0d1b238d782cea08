package sim

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/internal/barrier/tree"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// BarrierFanout is the fan-out of the simulated barrier's combining
// tree (the cluster's).
const BarrierFanout = tree.DefaultFanout

// barrierSpec is one simulated barrier: its policy, its tree's fan-out,
// and when each host's participant enters (nil: every one at time zero).
type barrierSpec struct {
	opts   policy.Options
	fanout int
	enter  func(i int) time.Duration
}

// barrier runs one traditional barrier of every host.
func (w *world) barrier(c Config, out *Outcome) error {
	return w.treeBarrier(c, out, barrierSpec{opts: policy.Options{MaxParticipants: c.N}, fanout: BarrierFanout})
}

// treeBarrier runs one barrier with one participant on every host over
// the real cores: each host's tree.Node, and at the root (the host the
// name places the manager on, as a directory shard would be) the
// barrier's policy.Barrier. Arrivals combine up the tree, outcomes come
// down it. A combining position costs one message's processing per
// message (its bytes too); the root's policy costs one per arrival, as
// a manager taking each Enter itself would. Out's Time is the last
// outcome reaching its participant, its Depth the most hops one label's
// arrival and outcome took together. The manager's replicas are not
// simulated.
func (w *world) treeBarrier(c Config, out *Outcome, spec barrierSpec) error {
	const name = "barrier"
	mgr := w.shardHost(w.shardFor(name))
	order := make([]string, 0, len(w.hosts))
	for _, h := range w.hosts {
		order = append(order, h.name)
	}
	shape, err := tree.NewShape(tree.RootFirst(mgr.name, order), spec.fanout)
	if err != nil {
		return err
	}
	b, err := policy.New(spec.opts)
	if err != nil {
		return err
	}
	ledger := tree.NewLedger(spec.opts.MaxParticipants)
	nodes := make([]*tree.Node, shape.Len())
	hostAt := make([]*host, shape.Len())
	for i := range nodes {
		nodes[i], err = tree.NewNode(tree.Config{Name: name, Shape: shape, Self: i, Mode: tree.ModeFor(spec.opts), Max: spec.opts.MaxParticipants})
		if err != nil {
			return err
		}
		hostAt[i] = w.byName[shape.Member(i)]
	}
	done := make([]bool, c.N)
	up := map[string]int{} // label -> hops its arrival took
	var step func(pos int, ev any, hops int)
	var decided func(d policy.Decision, hops int)
	var armed time.Time // the policy's timer
	// The simulator's driver steps the root's policy: its Box holds only
	// its timer, a Tick back on the root host's coordinator queue (the
	// earliest pending one stands).
	var policyDrive *driver[*world, *host, policy.Event, policy.Decision]
	policyDrive = &driver[*world, *host, policy.Event, policy.Decision]{
		send: func(w *world, h *host, s outbox.Send) { w.violate("the barrier policy sent %T", s.Msg) },
		timer: func(w *world, h *host, t outbox.Timer) {
			at := t.At
			if !armed.IsZero() && !at.Before(armed) {
				return
			}
			armed = at
			w.eng.at(virt(at), func() {
				if armed != at {
					return
				}
				armed = time.Time{}
				w.process(h, qCoord, func() { decided(policyDrive.step(w, h, b, policy.Tick{}), 0) })
			})
		},
	}
	decided = func(d policy.Decision, hops int) {
		_, reason := b.Fired()
		if outs := ledger.Outcomes(d, reason.String(), 1); len(outs) > 0 {
			step(0, tree.Release{Outcomes: outs}, 0)
		}
	}
	// The simulator's driver carries out a position's Box: its Flush
	// comes back on its host's coordinator queue, each send costs the
	// receiving position a message's processing and its bytes.
	drive := &driver[*world, treeAt, any, tree.Output]{
		timer: func(w *world, at treeAt, tm outbox.Timer) {
			h := hostAt[at.pos]
			w.eng.at(virt(tm.At), func() { w.process(h, qCoord, func() { step(at.pos, tree.Flush{}, at.hops) }) })
		},
		send: func(w *world, at treeAt, s outbox.Send) {
			to, _ := shape.Position(s.To.(string))
			msg := s.Msg
			cost := w.p.CoordCost + time.Duration(float64(proto.Size(msg))*w.p.ByteCost*float64(time.Second))
			if a, ok := msg.(*messages.BarrierArrivals); ok && to == 0 {
				// The root's policy takes each arrival in turn.
				cost += time.Duration(len(a.GetArrivals())-1) * w.p.CoordCost
			}
			w.post(hostAt[at.pos], hostAt[to], qCoord, viaActor, cost, func() { step(to, msg, at.hops+1) })
		},
	}
	step = func(pos int, ev any, hops int) {
		h := hostAt[pos]
		o := drive.step(w, treeAt{pos: pos, hops: hops}, nodes[pos], ev)
		if o.Err != nil {
			w.violate("tree position %d (%s): %v", pos, h.name, o.Err)
			return
		}
		for _, a := range o.Arrivals {
			up[a.GetLabel()] = hops
			d := policyDrive.step(w, mgr, b, policy.Enter{Label: a.GetLabel(), Host: a.GetHost()})
			if d.Err != nil {
				w.violate("enter %s: %v", a.GetLabel(), d.Err)
				continue
			}
			ledger.Note(a)
			decided(d, hops)
		}
		for _, oc := range o.Local {
			p := w.byName[oc.GetLabel()]
			total := up[oc.GetLabel()] + hops
			w.process(h, qStore, func() {
				if done[p.idx] {
					w.violate("%s released twice", p.name)
				}
				done[p.idx] = true
				out.Time = max(out.Time, w.eng.now)
				out.Depth = max(out.Depth, total)
			})
		}
	}
	for i, h := range w.hosts {
		pos, _ := shape.Position(h.name)
		var at time.Duration
		if spec.enter != nil {
			at = spec.enter(i)
		}
		w.eng.at(at, func() {
			w.send(h, h, qCoord, viaActor, func() { step(pos, tree.Enter{Label: h.name, Host: h.name}, 0) })
		})
	}
	w.eng.run(c.Timeout, nil)
	for i, ok := range done {
		if !ok {
			w.violate("%s was never released", w.hosts[i].name)
		}
	}
	return nil
}

// treeAt is a barrier tree position's step: the position, and how many
// hops the event took to reach it.
type treeAt struct{ pos, hops int }

// runBarrier simulates the barrier of spec on a cluster of c.
func runBarrier(c Config, spec barrierSpec) (*Outcome, error) {
	w := newWorld(c.Params)
	out := &Outcome{Scenario: "barrier", Nodes: c.N, Seed: c.Seed}
	if err := w.treeBarrier(c, out, spec); err != nil {
		return nil, err
	}
	out.Messages, out.Events, out.MaxQueue, out.CPU = w.msgs, w.eng.steps, w.eng.maxQueue, w.busy
	out.CoordQueue = w.queueWait[qCoord]
	out.Violations = append(out.Violations, w.violations...)
	return out, nil
}
