package sim

import (
	"testing"
	"time"
)

// TestMachineSharesItsCores: with CPUs cores, the hosts' work queues for
// them, and a host runs one job at a time (the testbed's nodes run at
// GOMAXPROCS 1); without, every queue of every host has its own core.
func TestMachineSharesItsCores(t *testing.T) {
	finish := func(cpus int, jobs [][2]int) []time.Duration {
		p := DefaultParams(4)
		p.CPUs = cpus
		w := newWorld(p)
		ends := make([]time.Duration, len(jobs))
		for i, j := range jobs {
			w.work(w.hosts[j[0]], queue(j[1]), time.Millisecond, func() { ends[i] = w.eng.now })
		}
		w.eng.run(time.Minute, nil)
		return ends
	}
	ms := time.Millisecond
	cases := []struct {
		name string
		cpus int
		jobs [][2]int // host, queue
		want []time.Duration
	}{
		{"a core each", 0, [][2]int{{0, int(qData)}, {1, int(qData)}, {2, int(qData)}, {3, int(qData)}}, []time.Duration{ms, ms, ms, ms}},
		{"four hosts on two cores", 2, [][2]int{{0, int(qData)}, {1, int(qData)}, {2, int(qData)}, {3, int(qData)}}, []time.Duration{ms, ms, 2 * ms, 2 * ms}},
		{"one host's queues, a core each", 0, [][2]int{{0, int(qData)}, {0, int(qShard)}, {0, int(qData)}}, []time.Duration{ms, ms, 2 * ms}},
		{"one host runs one job at a time", 2, [][2]int{{0, int(qData)}, {0, int(qShard)}, {1, int(qData)}}, []time.Duration{ms, 2 * ms, ms}},
		{"first come first served", 1, [][2]int{{2, int(qStore)}, {1, int(qData)}, {2, int(qData)}}, []time.Duration{ms, 2 * ms, 3 * ms}},
	}
	for _, c := range cases {
		got := finish(c.cpus, c.jobs)
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: job %d ended at %v, want %v (all: %v)", c.name, i, got[i], c.want[i], got)
			}
		}
	}
}

// TestMachinePauseHoldsTheHost: a paused host's jobs wait for the pause's
// end while the other hosts use the cores.
func TestMachinePauseHoldsTheHost(t *testing.T) {
	p := DefaultParams(3)
	p.CPUs = 1
	w := newWorld(p)
	var a, b time.Duration
	w.pause(w.hosts[1], 5*time.Millisecond)
	w.work(w.hosts[1], qData, time.Millisecond, func() { a = w.eng.now })
	w.work(w.hosts[2], qData, time.Millisecond, func() { b = w.eng.now })
	w.eng.run(time.Minute, nil)
	if a != 6*time.Millisecond || b != time.Millisecond {
		t.Errorf("paused host's job ended at %v (want 6ms), the other's at %v (want 1ms)", a, b)
	}
}
