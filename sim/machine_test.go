package sim

import (
	"math"
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

// TestWakeCostsAParkedHostsChunks: a chunk that reaches a host idle for
// WakeAfter waits Wake before its CPU; one that reaches a host at work
// does not, nor does a control message (its latency holds its wake-up).
// With and without shared cores.
func TestWakeCostsAParkedHostsChunks(t *testing.T) {
	us := time.Microsecond
	for _, cpus := range []int{0, 2} {
		p := DefaultParams(2)
		p.CPUs, p.Wake, p.WakeAfter = cpus, 300*us, 100*us
		w := newWorld(p)
		h := w.hosts[1]
		var ends []time.Duration
		job := func(q queue) {
			w.work(h, q, 10*us, func() { ends = append(ends, w.eng.now) })
		}
		job(qData)                                // parked since the start: 300 + 10
		w.eng.at(350*us, func() { job(qData) })   // idle 40 µs: 350 + 10
		w.eng.at(1000*us, func() { job(qStore) }) // a message: 1000 + 10
		w.eng.at(1020*us, func() { job(qData) })  // idle 10 µs: 1020 + 10
		w.eng.at(2000*us, func() { job(qData) })  // parked again: 2000 + 300 + 10
		w.eng.at(2100*us, func() { job(qData) })  // behind the one waking
		want := []time.Duration{310 * us, 360 * us, 1010 * us, 1030 * us, 2310 * us, 2320 * us}
		w.eng.run(time.Minute, nil)
		if len(ends) != len(want) {
			t.Fatalf("cpus=%d: %d jobs ended, want %d", cpus, len(ends), len(want))
		}
		for i := range want {
			if ends[i] != want[i] {
				t.Errorf("cpus=%d: job %d ended at %v, want %v (all: %v)", cpus, i, ends[i], want[i], ends)
			}
		}
	}
}

// TestWakeAddsAHopsWake: a chain's pipeline fill pays the wake-up once
// a hop (each relay is idle between chunks); the throughput does not
// change. A 1 MiB broadcast to 8 (a chain of 7) takes about 7 wakes
// longer with it.
func TestWakeAddsAHopsWake(t *testing.T) {
	base := cfg("broadcast", 8, 1<<20, 1)
	base.CPUs = TestbedCPUs
	woken := base
	woken.Wake, woken.WakeAfter = 500*time.Microsecond, 100*time.Microsecond
	a, b := run(t, base), run(t, woken)
	if a.Depth != 7 || b.Depth != 7 {
		t.Fatalf("depths %d and %d; want the chain of 7", a.Depth, b.Depth)
	}
	added := (b.Time - a.Time).Seconds() / woken.Wake.Seconds()
	if math.Abs(added-7) > 1.5 {
		t.Errorf("the wake-up added %.2f wakes (%v -> %v); want about one a hop, 7", added, a.Time, b.Time)
	}
}
