package revoke

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// sim is a deterministic shell for many Broadcasters: a message queue, no
// goroutines. Messages to dead or unknown members are dropped, as a real
// shell's sends to a dead member fail.
type sim struct {
	t     testing.TB
	bc    map[string]*Broadcaster
	dead  map[string]bool
	queue []simMsg
	head  int        // queue[head:] is pending
	rng   *rand.Rand // nil: FIFO order; else random order

	// crashAfter[m] = k: m crashes after sending k of the forwards of its
	// first decision (before delivering).
	crashAfter map[string]int

	delivered map[string]map[ID]int // member -> id -> deliveries
	rounds    map[string]map[ID]int // member -> id -> forwarding decisions
	sentBy    map[string]int        // member -> forwards sent
	msgs      int                   // forwards sent (excluding replays)
	replays   int                   // SetOverlay re-sends
}

type simMsg struct {
	from, to string
	n        Notice
}

func newSim(t testing.TB, overlays map[string]*Overlay, rng *rand.Rand, opts ...Option) *sim {
	s := &sim{
		t:          t,
		bc:         make(map[string]*Broadcaster, len(overlays)),
		dead:       map[string]bool{},
		rng:        rng,
		crashAfter: map[string]int{},
		delivered:  map[string]map[ID]int{},
		rounds:     map[string]map[ID]int{},
		sentBy:     map[string]int{},
	}
	for id, o := range overlays {
		s.bc[id] = NewBroadcaster(o, opts...)
	}
	return s
}

// overlaysFor builds every member's overlay of one topology.
func overlaysFor(t testing.TB, members []string) map[string]*Overlay {
	t.Helper()
	out := make(map[string]*Overlay, len(members))
	if len(members) == 0 {
		return out
	}
	base, err := NewOverlay(members, members[0])
	if err != nil {
		t.Fatalf("NewOverlay(%d members): %v", len(members), err)
	}
	for _, m := range members {
		if len(members) <= 64 {
			// Small topologies: the real constructor for every member.
			if out[m], err = NewOverlay(members, m); err != nil {
				t.Fatalf("NewOverlay(%d members, %q): %v", len(members), m, err)
			}
			continue
		}
		// Large ones: the same topology seen from m, sharing the
		// immutable rank tables (NewOverlay per member is O(n² log n)).
		v := *base
		v.self = base.rank[m]
		v.nbrs = v.neighborsOfRank(v.self)
		out[m] = &v
	}
	return out
}

func (s *sim) apply(at string, n Notice, d Decision) {
	if len(d.Sends) == 0 && !d.Deliver {
		return
	}
	id := n.ID()
	if s.rounds[at] == nil {
		s.rounds[at] = map[ID]int{}
	}
	s.rounds[at][id]++
	for i, to := range targets(d.Sends) {
		if k, ok := s.crashAfter[at]; ok && i >= k {
			s.dead[at] = true
			return
		}
		s.msgs++
		s.sentBy[at]++
		s.queue = append(s.queue, simMsg{from: at, to: to, n: n})
	}
	if _, ok := s.crashAfter[at]; ok {
		s.dead[at] = true
		return
	}
	if d.Deliver {
		if s.delivered[at] == nil {
			s.delivered[at] = map[ID]int{}
		}
		s.delivered[at][id]++
	}
}

func (s *sim) originate(at string, n Notice) {
	if s.dead[at] {
		s.t.Fatalf("origin %q is dead", at)
	}
	s.apply(at, n, s.bc[at].originate(n))
}

// step delivers one queued message; false when the queue is empty.
func (s *sim) step() bool {
	if s.head == len(s.queue) {
		return false
	}
	var m simMsg
	if s.rng == nil {
		m = s.queue[s.head]
		s.head++
		if s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		}
	} else {
		i := s.head + s.rng.Intn(len(s.queue)-s.head)
		m = s.queue[i]
		last := len(s.queue) - 1
		s.queue[i] = s.queue[last]
		s.queue = s.queue[:last]
		if s.head == len(s.queue) {
			s.queue, s.head = s.queue[:0], 0
		}
	}
	b, ok := s.bc[m.to]
	if !ok || s.dead[m.to] {
		return true
	}
	s.apply(m.to, m.n, b.receive(m.from, m.n))
	return true
}

func (s *sim) run() {
	for s.step() {
	}
}

// switchTo moves member m to overlay o, enqueueing the replays.
func (s *sim) switchTo(m string, o *Overlay) {
	if s.dead[m] {
		return
	}
	for _, snd := range s.bc[m].setOverlay(o).Sends {
		s.replays++
		s.queue = append(s.queue, simMsg{from: m, to: snd.To.(string), n: NoticeOf(snd.Msg.(*messages.RevokeNotice))})
	}
}

// checkAllDelivered asserts that every live member in want delivered id
// exactly once and forwarded it in exactly one decision.
func (s *sim) checkAllDelivered(want []string, id ID, ctx string) {
	s.t.Helper()
	for _, m := range want {
		if s.dead[m] {
			continue
		}
		if got := s.delivered[m][id]; got != 1 {
			s.t.Fatalf("%s: member %q delivered %v %d times, want 1", ctx, m, id, got)
		}
	}
	for m, byID := range s.rounds {
		if r := byID[id]; r > 1 {
			s.t.Fatalf("%s: member %q forwarded %v in %d decisions, want ≤ 1", ctx, m, id, r)
		}
	}
}

func names(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%04d", prefix, i)
	}
	return out
}

// randomNames returns n distinct ids in random (unsorted) order, so that
// ranks really come from sorting.
func randomNames(rng *rand.Rand, n int) []string {
	seen := make(map[string]bool, n)
	out := make([]string, 0, n)
	for len(out) < n {
		id := fmt.Sprintf("node-%x", rng.Uint32())
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// targets lists the members sent to, in order.
func targets(sends []outbox.Send) []string {
	out := make([]string, len(sends))
	for i, s := range sends {
		out[i] = s.To.(string)
	}
	return out
}
