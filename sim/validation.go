package sim

import "github.com/hoplite-go/hoplite/internal/reduction"

// Testbed is one measured median the simulator is checked against: the
// testbed's `hoplite bench` on network namespaces shaped by tc tbf, 2
// vCPUs (bench/results; N = 16 ran at 200 Mbit/s, N = 32 and 48 at 50,
// the rest at 400).
// AllReduce is measured in both shapes (Shape).
type Testbed struct {
	Scenario  string
	Nodes     int
	Bandwidth float64 // bits per second
	Size      int64
	Median    float64 // seconds
	// Min and Max are the fastest and slowest repetitions (0: not
	// recorded here): the measurement's own spread.
	Min, Max float64
	File     string // under bench/results
	// Miss, if set, says why the model does not meet the tolerance here;
	// the test then holds the prediction to MissBound instead, so that
	// the gap cannot grow unseen.
	Miss      string
	MissBound float64
	// Shape is an AllReduce's shape as the measurement ran it:
	// reduce-then-broadcast (cluster.ShapeDAry, hoplite bench's system
	// reduce-bcast), sliced (cluster.ShapeSliced), or "" for the cost
	// model's choice.
	Shape string
}

// TestbedMedians are the measurements the validation compares with, each
// from the report File in bench/results. The 1 MiB ones are 11
// repetitions each, every one right after a warm-up repetition
// (--warmup 1), on a machine running nothing but the testbed; each is
// the middle of three runs of its setting, all in D1MiB. The 32 MiB ones
// are 5 repetitions each, N = 16's 9.
var TestbedMedians = []Testbed{
	{Scenario: "broadcast", Nodes: 4, Bandwidth: 400e6, Size: 32 << 20, Median: 0.711878401, File: "testbed-broadcast-32MiB-n4-2026-11-25T0021.json"},
	{Scenario: "broadcast", Nodes: 8, Bandwidth: 400e6, Size: 32 << 20, Median: 0.722718645, File: "testbed-broadcast-1MiB-32MiB-n8-2026-11-24T2316.json"},
	{Scenario: "broadcast", Nodes: 16, Bandwidth: 200e6, Size: 32 << 20, Median: 1.456984746, File: "testbed-broadcast-32MiB-n16-2026-11-25T1808.json"},
	{Scenario: "reduce", Nodes: 4, Bandwidth: 400e6, Size: 32 << 20, Median: 0.706552138, File: "testbed-reduce-32MiB-n4-2026-11-25T0023.json"},
	{Scenario: "reduce", Nodes: 8, Bandwidth: 400e6, Size: 32 << 20, Median: 0.716625592, File: "testbed-reduce-1MiB-32MiB-n8-2026-11-24T2319.json"},
	{Scenario: "reduce", Nodes: 16, Bandwidth: 200e6, Size: 32 << 20, Median: 1.467707509, File: "testbed-reduce-32MiB-n16-2026-11-25T1814.json"},
	{Scenario: "allreduce", Nodes: 4, Bandwidth: 400e6, Size: 32 << 20, Median: 1.446315375, File: "archive/testbed-allreduce-32MiB-n4-paced-2026-11-24T0511.json", Shape: reduction.ShapeDAry},
	{Scenario: "allreduce", Nodes: 8, Bandwidth: 400e6, Size: 32 << 20, Median: 1.547921153, File: "testbed-allreduce-1MiB-32MiB-256MiB-n8-paced-2026-11-24T0439.json", Shape: reduction.ShapeDAry},
	// System ours: the sliced shape at 32 MiB (the ring all-gather).
	{Scenario: "allreduce", Nodes: 4, Bandwidth: 400e6, Size: 32 << 20, Median: 1.086070711, File: "testbed-allreduce-32MiB-256MiB-n4-ring-2026-11-24T1026.json", Shape: reduction.ShapeSliced},
	{Scenario: "allreduce", Nodes: 8, Bandwidth: 400e6, Size: 32 << 20, Median: 1.30332371, File: "testbed-allreduce-32MiB-n8-2026-11-24T1934.json", Shape: reduction.ShapeSliced},
	{Scenario: "broadcast", Nodes: 4, Bandwidth: 400e6, Size: 1 << 20, Median: 0.020142, Min: 0.019321, Max: 0.021876, File: D1MiB + "testbed-broadcast-1MiB-n4-2026-11-25T1747.json"},
	{Scenario: "broadcast", Nodes: 8, Bandwidth: 400e6, Size: 1 << 20, Median: 0.023081, Min: 0.020838, Max: 0.026792, File: D1MiB + "testbed-broadcast-1MiB-n8-2026-11-25T1748.json"},
	{Scenario: "reduce", Nodes: 4, Bandwidth: 400e6, Size: 1 << 20, Median: 0.023466, Min: 0.021496, Max: 0.033912, File: D1MiB + "testbed-reduce-1MiB-n4-2026-11-25T1747.json"},
	{Scenario: "reduce", Nodes: 8, Bandwidth: 400e6, Size: 1 << 20, Median: 0.027211, Min: 0.023910, Max: 0.034128, File: D1MiB + "testbed-reduce-1MiB-n8-2026-11-25T1743.json"},
	{Scenario: "allreduce", Nodes: 4, Bandwidth: 400e6, Size: 1 << 20, Median: 0.047279, Min: 0.042015, Max: 0.056507, File: D1MiB + "testbed-allreduce-1MiB-n4-2026-11-25T1745.json", Shape: reduction.ShapeDAry},
	{Scenario: "allreduce", Nodes: 8, Bandwidth: 400e6, Size: 1 << 20, Median: 0.050378, Min: 0.047467, Max: 0.054266, File: D1MiB + "testbed-allreduce-1MiB-n8-2026-11-25T1746.json", Shape: reduction.ShapeDAry},
	// System ours: at 1 MiB the cluster's cost model chooses the sliced
	// shape at N = 4 and 8 (at N = 8 by a hair: its two prices are
	// within 1 %, so the choice follows the bandwidth its members
	// measured); the shape is forced here as it ran.
	{Scenario: "allreduce", Nodes: 4, Bandwidth: 400e6, Size: 1 << 20, Median: 0.038079, Min: 0.036454, Max: 0.040599, File: D1MiB + "testbed-allreduce-1MiB-n4-2026-11-25T1747.json", Shape: reduction.ShapeSliced},
	// The sliced shape forced (hoplite bench's system sliced: members
	// no longer slice 1 MiB), the middle of three runs of the build whose
	// chain positions report only failures (ReduceTask.quiet).
	{Scenario: "allreduce", Nodes: 8, Bandwidth: 400e6, Size: 1 << 20, Median: 0.056767, Min: 0.052944, Max: 0.068837, File: DQuiet + "quiet-2-n8.json", Shape: reduction.ShapeSliced,
		Miss: "since its chain positions report only failures the model is 24 % fast: it charged their 112 reports 13 ms (the actor plane's 62 µs of CPU a message, fitted to round trips at 8 hosts on 2 cores), and the testbed measured no difference (56.4 ms before, 56.8 ms after, three runs of each build)", MissBound: 0.30},
	// 16 hosts at 200 Mbit/s (load 1.1-3.4 with the testbed's own
	// processes). The cost model chose reduce-then-broadcast for ours.
	{Scenario: "broadcast", Nodes: 16, Bandwidth: 200e6, Size: 1 << 20, Median: 0.051190, Min: 0.048950, Max: 0.061159, File: DLinkBurst + "testbed-broadcast-1MiB-n16-200mbit.json"},
	{Scenario: "reduce", Nodes: 16, Bandwidth: 200e6, Size: 1 << 20, Median: 0.060740, Min: 0.055973, Max: 0.069897, File: DLinkBurst + "testbed-reduce-1MiB-n16-200mbit.json"},
	{Scenario: "allreduce", Nodes: 16, Bandwidth: 200e6, Size: 1 << 20, Median: 0.119092, Min: 0.104951, Max: 0.147455, File: D1MiB + "testbed-allreduce-1MiB-n16-2026-11-25T1749.json", Shape: reduction.ShapeDAry},
	{Scenario: "allreduce", Nodes: 16, Bandwidth: 200e6, Size: 1 << 20, Median: 0.123144, Min: 0.112277, Max: 0.179619, File: D1MiB + "testbed-allreduce-1MiB-n16-2026-11-25T1749.json", Shape: reduction.ShapeDAry},
	// 32 and 48 hosts at 50 Mbit/s, so that the links rather than the
	// two cores bound the 32 MiB runs: 5 repetitions each, every one
	// after an unrecorded one (--warmup 1); the machine ran nothing else.
	{Scenario: "broadcast", Nodes: 32, Bandwidth: 50e6, Size: 1 << 20, Median: 0.187591, Min: 0.182784, Max: 0.190436, File: DLinkBurst + "testbed-broadcast-1MiB-32MiB-n32-50mbit.json"},
	{Scenario: "broadcast", Nodes: 32, Bandwidth: 50e6, Size: 32 << 20, Median: 5.690500, Min: 5.644131, Max: 5.798565, File: DLinkBurst + "testbed-broadcast-1MiB-32MiB-n32-50mbit.json"},
	{Scenario: "broadcast", Nodes: 48, Bandwidth: 50e6, Size: 1 << 20, Median: 0.210117, Min: 0.205756, Max: 0.231259, File: DLinkBurst + "testbed-broadcast-1MiB-32MiB-n48-50mbit.json"},
	{Scenario: "broadcast", Nodes: 48, Bandwidth: 50e6, Size: 32 << 20, Median: 5.783549, Min: 5.663062, Max: 5.873974, File: DLinkBurst + "testbed-broadcast-1MiB-32MiB-n48-50mbit.json"},
	{Scenario: "reduce", Nodes: 32, Bandwidth: 50e6, Size: 1 << 20, Median: 0.185984, Min: 0.181995, Max: 0.187560, File: DLinkBurst + "testbed-reduce-1MiB-32MiB-n32-50mbit.json"},
	{Scenario: "reduce", Nodes: 32, Bandwidth: 50e6, Size: 32 << 20, Median: 5.663861, Min: 5.656112, Max: 5.667574, File: DLinkBurst + "testbed-reduce-1MiB-32MiB-n32-50mbit.json"},
	{Scenario: "reduce", Nodes: 48, Bandwidth: 50e6, Size: 1 << 20, Median: 0.225150, Min: 0.217742, Max: 0.234540, File: DLinkBurst + "testbed-reduce-1MiB-32MiB-n48-50mbit.json"},
	{Scenario: "reduce", Nodes: 48, Bandwidth: 50e6, Size: 32 << 20, Median: 5.775173, Min: 5.721920, Max: 5.990993, File: DLinkBurst + "testbed-reduce-1MiB-32MiB-n48-50mbit.json"},
}

// DQuiet is the directory of the sliced 1 MiB AllReduce's runs before
// and after its chain positions went quiet.
const DQuiet = "testbed-allreduce-1MiB-quiet-positions-2026-11-28T1345/"

// DLinkBurst is the directory of the runs at 32 and 48 hosts at 50
// Mbit/s and at 16 at 200 Mbit/s of the members that state their
// shaper's burst (-link-burst).
const DLinkBurst = "testbed-validation-link-burst-2026-11-28T1655/"

// D1MiB is the directory of the 1 MiB references' runs.
const D1MiB = "testbed-1MiB-n4-n8-n16-2026-11-25T1743/"

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
