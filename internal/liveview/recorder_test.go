package liveview

import (
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
)

// TestRecorderKeepsBarrierStates: a barrier's State is kept as its
// latest, beside the ring (a busy barrier never pushes the transfers
// out), listed in the member's status by name, at most MaxBarriers:
// closed barriers are forgotten first, then those that changed longest
// ago.
func TestRecorderKeepsBarrierStates(t *testing.T) {
	r := NewRecorder("m", 8, func() Status { return Status{Member: "m"} })
	t0 := time.Unix(1000, 0)
	for i := range MaxBarriers {
		r.Observe(&events.BarrierState{Barrier: fmt.Sprintf("b%02d", i), Entered: 1, At: t0.Add(time.Duration(i) * time.Second),
			Closed: i == 40})
	}
	for n := range 20 { // b05 is busy: only its latest counts
		r.Observe(&events.BarrierState{Barrier: "b05", Entered: n + 2, At: t0.Add(time.Hour)})
	}
	r.Observe(&events.BarrierState{Barrier: "new", Entered: 1, At: t0.Add(2 * time.Hour)}) // the closed b40 goes
	r.Observe(&events.BarrierState{Barrier: "newer", Entered: 1, At: t0.Add(2 * time.Hour)})
	b := r.Since(0)
	if b.Last != 0 || len(b.Entries) != 0 {
		t.Fatalf("barrier states went into the ring: %+v", b)
	}
	bs := b.Status.Barriers
	if len(bs) != MaxBarriers {
		t.Fatalf("%d barriers listed, want %d", len(bs), MaxBarriers)
	}
	names := map[string]events.BarrierState{}
	for i, s := range bs {
		if i > 0 && bs[i-1].Barrier >= s.Barrier {
			t.Fatalf("not by name: %s before %s", bs[i-1].Barrier, s.Barrier)
		}
		names[s.Barrier] = s
	}
	if _, ok := names["b40"]; ok {
		t.Fatal("the closed barrier was kept over open ones")
	}
	if _, ok := names["b00"]; ok {
		t.Fatal("the barrier that changed longest ago was kept")
	}
	if names["b05"].Entered != 21 || names["new"].Entered != 1 || names["newer"].Entered != 1 || names["b01"].Entered != 1 {
		t.Fatalf("states kept: b05 %+v, new %+v, newer %+v", names["b05"], names["new"], names["newer"])
	}
}
