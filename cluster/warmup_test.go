package cluster

import (
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/transport"
)

// A ready cluster is a warm one: once WaitMembers has seen every member,
// each holds a pooled data-plane connection to every other one (a Get's
// Locate and stream find it instead of dialing) and has sampled the
// control latency; with NoWarmUp it holds none.
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
				m, err := joinSlot(t, s, seeds, testLogger(t, logrus.InfoLevel), func(c *MemberConfig) { c.NoWarmUp = cold })
				if err != nil {
					t.Fatal(err)
				}
				ms = append(ms, m)
			}
			waitMembers(t, 3, ms...)
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
