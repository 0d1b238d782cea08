package bench

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestParseMachineCounters(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	c, err := parseMachineCounters("cpu  100 5 40 9000 7 3 12 2 50 0\ncpu0 50 2 20 4500 3 1 6 1 25 0\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(100+5+40+3+12+2) * int64(10*time.Millisecond); c.busyNs != want {
		t.Errorf("busy %v, want %v (idle, iowait and guest left out)", time.Duration(c.busyNs), time.Duration(want))
	}
	if want := int64(12) * int64(10*time.Millisecond); c.softirqNs != want {
		t.Errorf("softirq %v, want %v", time.Duration(c.softirqNs), time.Duration(want))
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, err := parseMachineCounters(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// The machine's busy time grows by at least what this process burns.
func TestMachineCountersCountThisProcess(t *testing.T) {
	before, err := readMachineCounters()
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := selfCPU(t)
	for selfCPU(t)-cpu0 < 100*time.Millisecond { // bounded by the CPU it burns
	}
	after, err := readMachineCounters()
	if err != nil {
		t.Fatal(err)
	}
	// Ticks are sampled: allow two per CPU's worth of slack.
	if d := after.sub(before); time.Duration(d.busyNs) < 60*time.Millisecond {
		t.Fatalf("the machine was busy %v while this process burned 100 ms", time.Duration(d.busyNs))
	}
}

// selfCPU is the CPU time (user and system) this process has used.
func selfCPU(t *testing.T) time.Duration {
	d, err := rusageCPU()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func rusageCPU() (time.Duration, error) {
	var ru syscall.Rusage
	err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), err
}

// cpuOnly is a backend whose CPU and process counters are this
// process's; nothing else of it is called.
type cpuOnly struct{ backend }

func (cpuOnly) CPU(context.Context) (time.Duration, error) { return rusageCPU() }

func (cpuOnly) procCounters() (procCounters, error) { return readProcCounters(os.Getpid()) }

// A sample measured on a backend whose processes can be read records the
// machine's busy and softirq time over the operation beside the
// processes' own counters.
func TestCPUMeterRecordsTheMachine(t *testing.T) {
	m := startCPU(t.Context(), cpuOnly{})
	cpu0 := selfCPU(t)
	for selfCPU(t)-cpu0 < 100*time.Millisecond { // bounded by the CPU it burns
	}
	var s sample
	m.stop(t.Context(), &s)
	if !s.hasCPU || s.cpu < 90*time.Millisecond {
		t.Fatalf("the operation's CPU: %v (recorded %v), want about 100 ms", s.cpu, s.hasCPU)
	}
	busy, ok := s.extra["machine_busy_s"]
	if !ok || busy < 0.06 {
		t.Errorf("machine_busy_s %v (recorded %v) while this process burned 100 ms", busy, ok)
	}
	if irq, ok := s.extra["softirq_s"]; !ok || irq < 0 || irq > busy {
		t.Errorf("softirq_s %v (recorded %v): want between 0 and the busy time %v", irq, ok, busy)
	}
	if _, ok := s.extra["cpu_sys_s"]; !ok {
		t.Errorf("no cpu_sys_s beside the machine's counters: %v", s.extra)
	}
}
