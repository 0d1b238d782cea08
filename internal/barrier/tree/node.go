package tree

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// DefaultLinger is Config.Linger's default: what an expectation that
// does not hold (a participant entering at another member than the one
// counted on, or never) costs a holding position at most.
const DefaultLinger = 10 * time.Millisecond

// Config configures one position of one barrier's tree.
type Config struct {
	// Name is the barrier's; it names the messages.
	Name  string
	Shape *Shape
	// Self is this member's position.
	Self int
	Mode Mode
	// Expect is, per position, how many participants enter there (Hold
	// only); nil counts one at each.
	Expect []int
	// Linger is the longest a holding position keeps an arrival while
	// its subtree is short of its count (0: DefaultLinger).
	Linger time.Duration
	// Max bounds what a position holds and remembers: the barrier's
	// MaxParticipants. At least 1.
	Max int
	// Coalesce: what a position would forward at once waits for a Flush
	// due at the same instant, which an actor shell delivers after the
	// messages already in its mailbox, so that arrivals that reached the
	// position together go up together, without a timer's delay.
	Coalesce bool
}

// Enter is a participant's entry at this position's member.
type Enter struct {
	Label, Host string
	Reply       *messages.BarrierPeer
	RequestID   uint64
}

// Release hands the root's outcomes (the barrier's decisions) to the
// tree: each goes down toward the position its label entered at.
type Release struct {
	Outcomes []*messages.BarrierOutcome
}

// Flush is the timer a holding position arms: at its time, what it
// holds goes up whether its subtree is complete or not (and, with
// Config.Coalesce, what it gathered).
type Flush struct{}

// Output is what one step asks of the shell. Sends are addressed to
// member names (strings).
type Output struct {
	outbox.Box
	// Arrivals, at the root only, are for the barrier's policy, in the
	// order they reached the root.
	Arrivals []*messages.BarrierArrival
	// Local are the outcomes of participants that entered at this
	// position's member.
	Local []*messages.BarrierOutcome
	// Err, if set, says the event was refused (not from a child, not
	// the parent's, malformed) and changed nothing; the rest is empty.
	Err error
}

// Node is one member's position in one barrier's tree. It is not safe
// for concurrent use: one actor owns it.
type Node struct {
	cfg     Config
	parent  int
	expect  int // arrivals the subtree is expected to bring (Hold)
	seen    map[string]struct{}
	got     int // distinct arrivals counted toward expect
	pending []*messages.BarrierArrival
	open    bool      // forwarding at once: not holding (any more)
	flushAt time.Time // the armed Flush (zero: none)
}

// NewNode returns the position cfg.Self of cfg.Shape.
func NewNode(cfg Config) (*Node, error) {
	switch {
	case cfg.Shape == nil:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: no shape", cfg.Name)
	case !cfg.Shape.valid(cfg.Self):
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: position %d of %d", cfg.Name, cfg.Self, cfg.Shape.Len())
	case cfg.Mode != Hold && cfg.Mode != AtOnce:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: %v", cfg.Name, cfg.Mode)
	case cfg.Expect != nil && len(cfg.Expect) != cfg.Shape.Len():
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: %d expectations for %d positions", cfg.Name, len(cfg.Expect), cfg.Shape.Len())
	case cfg.Max < 1:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: max %d", cfg.Name, cfg.Max)
	case cfg.Linger < 0:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: linger %v", cfg.Name, cfg.Linger)
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	n := &Node{cfg: cfg, parent: cfg.Shape.Parent(cfg.Self), seen: map[string]struct{}{}}
	for _, p := range cfg.Shape.Subtree(cfg.Self) {
		e := 1
		if cfg.Expect != nil {
			e = max(cfg.Expect[p], 0)
		}
		n.expect += e
	}
	// The root holds too: a traditional barrier cannot fire before its
	// last arrival, and the replicas then take all in one message.
	n.open = cfg.Mode == AtOnce || n.expect == 0
	return n, nil
}

// Self is this position.
func (n *Node) Self() int { return n.cfg.Self }

// Root reports whether this position is the root.
func (n *Node) Root() bool { return n.parent < 0 }

// Holding is how many arrivals the position holds back.
func (n *Node) Holding() int { return len(n.pending) }

// Step applies one event: Enter, *messages.BarrierArrivals (from a
// child), *messages.BarrierReleases (from the parent), Release (at the
// root) or Flush. An event refused (Output.Err) changes nothing.
func (n *Node) Step(now time.Time, ev any) Output {
	out, err := n.step(now, ev)
	if err != nil {
		return Output{Err: err}
	}
	return out
}

func (n *Node) step(now time.Time, ev any) (Output, error) {
	var out Output
	switch m := ev.(type) {
	case Enter:
		if m.Label == "" {
			return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: empty label", n.cfg.Name)
		}
		n.arrive(&messages.BarrierArrival{Label: m.Label, Host: m.Host, Reply: m.Reply, RequestId: m.RequestID,
			Leaf: int32(n.cfg.Self), AtUnixNano: now.UnixNano()})
	case *messages.BarrierArrivals:
		from := int(m.GetFrom())
		if n.cfg.Shape.Parent(from) != n.cfg.Self || !n.cfg.Shape.valid(from) {
			return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: arrivals from %d, not a child of %d", n.cfg.Name, from, n.cfg.Self)
		}
		for _, a := range m.GetArrivals() {
			if a.GetLabel() == "" || n.cfg.Shape.Toward(from, int(a.GetLeaf())) == -2 {
				return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: arrival %q from %d entered at %d, outside its subtree", n.cfg.Name, a.GetLabel(), from, a.GetLeaf())
			}
		}
		for _, a := range m.GetArrivals() {
			n.arrive(a)
		}
	case *messages.BarrierReleases:
		if int(m.GetFrom()) != n.parent || n.parent < 0 {
			return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: releases from %d, not the parent of %d", n.cfg.Name, m.GetFrom(), n.cfg.Self)
		}
		if err := n.route(m.GetOutcomes(), &out); err != nil {
			return Output{}, err
		}
	case Release:
		if n.parent >= 0 {
			return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: release at %d, not the root", n.cfg.Name, n.cfg.Self)
		}
		if err := n.route(m.Outcomes, &out); err != nil {
			return Output{}, err
		}
	case Flush:
		if n.flushAt.IsZero() || now.Before(n.flushAt) {
			return out, nil
		}
		// Short of its count: what it holds goes now, and it holds
		// again what comes next, for another Linger at most.
		n.flushAt = time.Time{}
		n.send(&out)
		return out, nil
	default:
		return out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: unknown event %T", n.cfg.Name, ev)
	}
	n.forward(now, &out)
	return out, nil
}

// arrive takes one arrival in. A label seen before is passed on
// without counting it again: a repeat is the policy's to answer.
func (n *Node) arrive(a *messages.BarrierArrival) {
	n.pending = append(n.pending, a)
	if _, dup := n.seen[a.GetLabel()]; dup || len(n.seen) >= n.cfg.Max {
		return
	}
	n.seen[a.GetLabel()] = struct{}{}
	n.got++
}

// forward sends (or, at the root, hands over) what the position holds
// when its mode lets it go.
func (n *Node) forward(now time.Time, out *Output) {
	if len(n.pending) == 0 {
		return
	}
	if !n.open && (n.got >= n.expect || len(n.pending) >= n.cfg.Max) {
		// Complete, or holding as many as the barrier takes (repeats
		// counted): nothing more is worth waiting for.
		n.open = true
	}
	if !n.open {
		if n.flushAt.IsZero() {
			n.flushAt = now.Add(n.cfg.Linger)
			out.After(n.flushAt, Flush{})
		}
		return
	}
	if n.cfg.Coalesce {
		if n.flushAt.IsZero() || n.flushAt.After(now) {
			n.flushAt = now
			out.After(now, Flush{})
		}
		return
	}
	n.flushAt = time.Time{}
	n.send(out)
}

// send hands up everything held.
func (n *Node) send(out *Output) {
	if len(n.pending) == 0 {
		return
	}
	batch := n.pending
	n.pending = nil
	if n.parent < 0 {
		out.Arrivals = append(out.Arrivals, batch...)
		return
	}
	out.Send(n.cfg.Shape.Member(n.parent), &messages.BarrierArrivals{Name: n.cfg.Name, From: int32(n.cfg.Self), Arrivals: batch})
}

// route splits outcomes between this member's participants and one
// message per child whose subtree holds their labels.
func (n *Node) route(outcomes []*messages.BarrierOutcome, out *Output) error {
	var order []int
	byChild := map[int][]*messages.BarrierOutcome{}
	for _, o := range outcomes {
		c := n.cfg.Shape.Toward(n.cfg.Self, int(o.GetLeaf()))
		switch c {
		case -2:
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier tree %q: outcome of %q for position %d, outside %d's subtree", n.cfg.Name, o.GetLabel(), o.GetLeaf(), n.cfg.Self)
		case -1:
		default:
			if byChild[c] == nil {
				order = append(order, c)
			}
			byChild[c] = append(byChild[c], o)
		}
	}
	for _, o := range outcomes {
		if int(o.GetLeaf()) == n.cfg.Self {
			out.Local = append(out.Local, o)
		}
	}
	for _, c := range order {
		out.Send(n.cfg.Shape.Member(c), &messages.BarrierReleases{Name: n.cfg.Name, From: int32(n.cfg.Self), Outcomes: byChild[c]})
	}
	return nil
}
