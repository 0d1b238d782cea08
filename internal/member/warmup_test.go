package member

import (
	"fmt"
	"slices"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/transport"
)

// A ready cluster is a warm one: once WaitMembers has seen every member,
// each holds a pooled data-plane connection to every other one (a Get's
// Locate and stream find it instead of dialing) and has sampled the
// control latency, and the process has chosen the pages of its large
// object buffers and parked the actors' kept workers; with the no-warm-up experiment it
// holds none.
func TestReadyClusterHoldsWarmConnections(t *testing.T) {
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		t.Run(name, func(t *testing.T) {
			slots, seeds := memberSlots(t, 3)
			var ms []*Member
			for _, s := range slots {
				m, err := joinSlot(t, s, seeds, testLogger(t, logrus.InfoLevel), func(c *MemberConfig) { c.exp.NoWarmUp = cold })
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, m)
			}
			waitMembers(t, 3, ms...)
			if p := bufalloc.Current(); !cold && p == bufalloc.PagesUnchosen {
				t.Errorf("ready and warm, but the pages of large buffers are %v: the warm-up measures and chooses", p)
			}
			if n := actorutil.KeptFloor(); !cold && n != actorutil.KeptWorkers {
				t.Errorf("ready and warm, but the actors' pool keeps %d parked workers, want %d", n, actorutil.KeptWorkers)
			}
			for _, m := range ms {
				tcp, ok := m.data.(*transport.TCP)
				if !ok {
					t.Fatalf("%s: data plane %T, want the TCP transport", m.ID(), m.data)
				}
				for _, o := range ms {
					if o == m {
						continue
					}
					n := tcp.IdleConns(o.DataAddress())
					if !cold && n < 1 {
						t.Errorf("%s: no warm connection to %s (%s) once ready", m.ID(), o.ID(), o.DataAddress())
					}
					if cold && n != 0 {
						t.Errorf("%s, cold: %d pooled connections to %s before any operation", m.ID(), n, o.ID())
					}
				}
				_, _, latencies, _ := m.estimator.Estimate()
				if !cold && latencies == 0 {
					t.Errorf("%s: no control latency sampled once ready", m.ID())
				}
				if got := len(m.warm.warmPeers()); !cold && got != 2 {
					t.Errorf("%s: %d peers warm, want 2", m.ID(), got)
				}
			}
		})
	}
}

// Beyond maxWarmPeers a member keeps warm the peers that follow it in
// member-id order, wrapping around: every member a different window, all
// of them bounded.
func TestWarmTargetsAreBounded(t *testing.T) {
	idx := newPeerIndex()
	for i := range 40 {
		id := fmt.Sprintf("m%02d", i)
		if id == "m10" {
			continue // this member
		}
		idx.byData[fmt.Sprintf("d%02d", i)] = id
	}
	m := &Member{id: "m10"}
	m.peers.Store(idx)
	w := newWarmer(m, false)
	got := w.targets()
	var want []string
	for i := 11; len(want) < maxWarmPeers; i = (i + 1) % 40 {
		if i != 10 {
			want = append(want, fmt.Sprintf("d%02d", i))
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("targets %v\nwant %v", got, want)
	}
	// A small cluster: every peer.
	small := newPeerIndex()
	small.byData["d1"], small.byData["d2"] = "m01", "m02"
	m.peers.Store(small)
	if got := w.targets(); !slices.Equal(got, []string{"d1", "d2"}) {
		t.Errorf("targets of a small cluster %v", got)
	}
}
