package sim

import "github.com/hoplite-go/hoplite/coordinator"

// Testbed is one measured median the simulator is checked against: the
// testbed's `hoplite bench` on network namespaces shaped by tc tbf, 2
// vCPUs (bench/results; N = 16 ran at 200 Mbit/s, the rest at 400).
// AllReduce is measured in both shapes (Shape).
type Testbed struct {
	Scenario  string
	Nodes     int
	Bandwidth float64 // bits per second
	Size      int64
	Median    float64 // seconds
	File      string  // under bench/results
	// Miss, if set, says why the model does not meet the tolerance here;
	// the test then holds the prediction to MissBound instead, so that
	// the gap cannot grow unseen.
	Miss      string
	MissBound float64
	// Shape is an AllReduce's shape as the measurement ran it:
	// reduce-then-broadcast (coordinator.ShapeDAry, hoplite bench's
	// system reduce-bcast), sliced, or "" for the cost model's choice.
	Shape string
}

// TestbedMedians are the measurements the validation compares with.
var TestbedMedians = []Testbed{
	{"broadcast", 4, 400e6, 32 << 20, 0.711878401, "testbed-broadcast-32MiB-n4-2026-11-25T0021.json", "", 0, ""},
	{"broadcast", 8, 400e6, 32 << 20, 0.722718645, "testbed-broadcast-1MiB-32MiB-n8-2026-11-24T2316.json", "", 0, ""},
	{"broadcast", 16, 200e6, 32 << 20, 1.536729712, "testbed-broadcast-32MiB-n16-2026-11-25T0012.json", "", 0, ""},
	{"reduce", 4, 400e6, 32 << 20, 0.706552138, "testbed-reduce-32MiB-n4-2026-11-25T0023.json", "", 0, ""},
	{"reduce", 8, 400e6, 32 << 20, 0.716625592, "testbed-reduce-1MiB-32MiB-n8-2026-11-24T2319.json", "", 0, ""},
	{"reduce", 16, 200e6, 32 << 20, 1.454277261, "testbed-reduce-32MiB-n16-2026-11-25T0016.json", "", 0, ""},
	{"allreduce", 4, 400e6, 32 << 20, 1.446315375, "archive/testbed-allreduce-32MiB-n4-paced.json", "", 0, coordinator.ShapeDAry},
	{"allreduce", 8, 400e6, 32 << 20, 1.547921153, "testbed-allreduce-1MiB-32MiB-256MiB-n8-paced.json", "", 0, coordinator.ShapeDAry},
	{"broadcast", 8, 400e6, 1 << 20, 0.020826616, "testbed-broadcast-1MiB-32MiB-n8-2026-11-24T2316.json", "", 0, ""},
	{"reduce", 8, 400e6, 1 << 20, 0.027477884, "testbed-reduce-1MiB-32MiB-n8-2026-11-24T2319.json",
		"the testbed's reduce positions start late: its workers' timelines show tasks arriving 1-9 ms apart as the " +
			"sources are located and a root's target registered 1.3-5.8 ms after its task, where the model has every task " +
			"placed by 0.7 ms and the target registered by 1.4 ms; the CPU the run measured (18.5 ms in 27.5 ms) queued on " +
			"the machine's 2 cores (Params.CPUs) accounts for little of it, so what holds those steps up is not CPU time " +
			"but waiting to be scheduled (8 idle GOMAXPROCS-1 processes woken per step), which is not modelled; its median " +
			"moved between 23.1 and 27.5 ms across runs", 0.25, ""},
	{"allreduce", 8, 400e6, 1 << 20, 0.051956579, "testbed-allreduce-1MiB-32MiB-256MiB-n8-paced.json", "", 0, coordinator.ShapeDAry},
	// System ours: the sliced shape at 32 MiB (the ring all-gather), the
	// cost model's choice at 1 MiB (reduce-then-broadcast).
	{"allreduce", 4, 400e6, 32 << 20, 1.086070711, "testbed-allreduce-32MiB-256MiB-n4-ring.json", "", 0, coordinator.ShapeSliced},
	{"allreduce", 8, 400e6, 32 << 20, 1.30332371, "testbed-allreduce-32MiB-n8-2026-11-24T1934.json", "", 0, coordinator.ShapeSliced},
	{"allreduce", 8, 400e6, 1 << 20, 0.04945371, "testbed-allreduce-1MiB-32MiB-256MiB-n8-paced.json", "", 0, ""},
}

// Tolerance is how far a prediction may be from its measured median:
// 10 % at 32 MiB, 20 % at 1 MiB, MissBound where the model misses.
func (t Testbed) Tolerance() float64 {
	if t.Miss != "" {
		return t.MissBound
	}
	if t.Size >= 32<<20 {
		return 0.10
	}
	return 0.20
}

// Config is the simulated run of the measurement's setting: the
// testbed's links, and its hosts on the testbed machine's cores.
func (t Testbed) Config(seed uint64) Config {
	p := DefaultParams(t.Nodes)
	p.Bandwidth, p.Burst, p.Seed, p.CPUs = t.Bandwidth, TestbedBurst(t.Bandwidth), seed, TestbedCPUs
	return Config{Scenario: t.Scenario, Params: p, Size: t.Size, Shape: t.Shape}
}
