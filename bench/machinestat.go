package bench

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// machineCounters are the whole machine's CPU times, summed over its
// CPUs (the first line of /proc/stat): what every process and the
// kernel did, including work that no process of the run is charged for.
// The kernel runs softirq work (the network stack's receive side, which
// on the testbed's veth links is every packet's delivery) in whatever
// task is on the CPU when it is raised, or in its ksoftirqd threads when
// there is much of it: a run's members are charged for it or not as the
// kernel happens to schedule it, and softirq time here counts it either
// way.
type machineCounters struct {
	// busyNs is the time the CPUs did anything: user, nice, system, irq,
	// softirq and steal (everything but idle and iowait).
	busyNs int64
	// softirqNs is the time in softirq, whichever task ran it.
	softirqNs int64
}

func (c machineCounters) sub(o machineCounters) machineCounters {
	return machineCounters{busyNs: c.busyNs - o.busyNs, softirqNs: c.softirqNs - o.softirqNs}
}

// readMachineCounters reads /proc/stat.
func readMachineCounters() (machineCounters, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCounters{}, err
	}
	return parseMachineCounters(string(b))
}

// parseMachineCounters reads the "cpu" line of a /proc/stat: user nice
// system idle iowait irq softirq steal (guest time is in user already),
// in USER_HZ ticks (1/100 s on every Linux ABI).
func parseMachineCounters(stat string) (machineCounters, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCounters{}, fmt.Errorf("/proc/stat: first line %q is not the CPUs' total", line)
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return machineCounters{}, fmt.Errorf("/proc/stat: field %d of %q: %w", i+1, line, err)
		}
		v[i] = n * int64(10*time.Millisecond)
	}
	const user, nice, system, irq, softirq, steal = 0, 1, 2, 5, 6, 7 // 3 and 4: idle, iowait
	return machineCounters{busyNs: v[user] + v[nice] + v[system] + v[irq] + v[softirq] + v[steal], softirqNs: v[softirq]}, nil
}
