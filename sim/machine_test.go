package sim

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestMachineSharesItsCores: with CPUs cores, the hosts' work queues for
// them, and a host runs one job at a time (the testbed's nodes run at
// GOMAXPROCS 1); without, every queue of every host has its own core.
func TestMachineSharesItsCores(t *testing.T) {
	finish := func(cpus int, jobs [][2]int) []time.Duration {
		p := DefaultParams(4)
		p.CPUs, p.Wake = cpus, 0 // the cores alone: see TestWakeCostsAParkedHost
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
	p.CPUs, p.Wake = 1, 0
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

// TestWakeCostsAParkedHost: the first job of a host that has had nothing
// to do for WakeAfter costs Wake more, a message's as a chunk's; a job
// that finds the host at work, or idle for less, does not; and hosts
// woken at one instant on shared cores queue for their wake-ups.
func TestWakeCostsAParkedHost(t *testing.T) {
	us := time.Microsecond
	for _, cpus := range []int{0, 2} {
		p := DefaultParams(2)
		p.CPUs, p.Wake, p.WakeAfter = cpus, 300*us, time.Millisecond
		w := newWorld(p)
		h := w.hosts[1]
		var ends []time.Duration
		job := func(q queue) {
			w.work(h, q, 10*us, func() { ends = append(ends, w.eng.now) })
		}
		job(qData)                                // parked since the start: 300 + 10
		w.eng.at(5*us, func() { job(qData) })     // behind it, at work: 320
		w.eng.at(1000*us, func() { job(qStore) }) // idle 680 µs: 1000 + 10
		w.eng.at(3000*us, func() { job(qStore) }) // a message to a parked host: 3000 + 300 + 10
		w.eng.at(3400*us, func() { job(qData) })  // idle 90 µs: 3400 + 10
		want := []time.Duration{310 * us, 320 * us, 1010 * us, 3310 * us, 3410 * us}
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
	p := DefaultParams(5)
	p.CPUs, p.Wake, p.WakeAfter = 2, 300*us, time.Millisecond
	w := newWorld(p)
	var ends []time.Duration
	for _, h := range w.hosts[1:] {
		w.work(h, qStore, 0, func() { ends = append(ends, w.eng.now) })
	}
	w.eng.run(time.Minute, nil)
	if want := []time.Duration{300 * us, 300 * us, 600 * us, 600 * us}; !slices.Equal(ends, want) {
		t.Errorf("four parked hosts woken at once on two cores: ends %v, want %v", ends, want)
	}
}

// TestFloorsMatchTheTestbed: the control planes' latency and per-message
// CPU in DefaultParams reproduce the round-trip floors hoplite bench
// measured on the testbed (host 0 to every other host at once, 1 MiB
// reduce runs of 2026-11-25T1514 and 1515), to which they were fitted.
func TestFloorsMatchTheTestbed(t *testing.T) {
	for _, f := range []struct {
		n         int
		dataPlane bool
		measured  time.Duration
	}{
		{4, false, 778 * time.Microsecond},
		{8, false, 1306 * time.Microsecond},
		{4, true, 281 * time.Microsecond},
		{8, true, 381 * time.Microsecond},
	} {
		p := DefaultParams(f.n)
		p.CPUs = TestbedCPUs
		got := Floor(p, f.dataPlane, false)
		off := got.Seconds()/f.measured.Seconds() - 1
		t.Logf("N=%d data plane %v: measured %v, model %v (%+.1f %%); fan-in %v", f.n, f.dataPlane, f.measured, got, 100*off, Floor(p, f.dataPlane, true))
		if math.Abs(off) > 0.05 {
			t.Errorf("N=%d data plane %v: the model's floor %v is %+.1f %% from the measured %v", f.n, f.dataPlane, got, 100*off, f.measured)
		}
	}
}
