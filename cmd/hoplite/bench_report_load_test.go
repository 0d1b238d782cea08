package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// hoplite bench report says beside the ratio when ours and the best peer
// ran under different loads, and gives each run's load range (and its
// --load) in the run's line; a run without load readings (before they
// were recorded) reads as before.
func TestBenchReportMarksADifferentLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, oursLoad, peerLoad []float64, procs int) {
		r := &bench.Report{Scenario: "broadcast", Mode: "testbed", Command: []string{"hoplite", "bench", "broadcast"},
			Machine: bench.Machine{CPUs: 2}, Nodes: 8, Bandwidth: "400 Mbit/s", Reps: 3, Sizes: []int64{32 << 20},
			Results: []bench.Result{
				{Scenario: "broadcast", Size: 32 << 20, System: "ours", Status: bench.StatusOK, Median: 0.7, Ideal: 0.671, Load: oursLoad},
				{Scenario: "broadcast", Size: 32 << 20, System: "mpi-best", Status: bench.StatusOK, Median: 0.9, Ideal: 0.671, Load: peerLoad,
					Timing: bench.TimingScheduled},
			}}
		if len(oursLoad) > 0 {
			r.Results[0].LoadMedian, r.Results[1].LoadMedian = oursLoad[len(oursLoad)/2], peerLoad[len(peerLoad)/2]
			r.Load = bench.RunLoad{Procs: procs, CPUs: 2, Min: 0.5, Max: 3.5, Measured: true}
		}
		if err := r.WriteJSON(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	write("differ.json", []float64{0.5, 0.5, 0.5}, []float64{3.5, 3.5, 3.5}, 2)
	write("same.json", []float64{0.5, 0.5, 0.5}, []float64{0.75, 0.75, 0.75}, 0)
	write("old.json", nil, nil, 0)
	tb := reportTable{Name: "t", Rows: []reportRow{
		{Label: "differ", File: "differ.json", Scenario: "broadcast", Size: "32MiB"},
		{Label: "same", File: "same.json", Scenario: "broadcast", Size: "32MiB"},
		{Label: "old", File: "old.json", Scenario: "broadcast", Size: "32MiB"},
	}}
	out, err := renderTable(dir, tb, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| differ | **0.700 s (1.04 S/B)** | 0.900 s mpi-best | 0.78× (load differs: 0.50 against 3.50) |",
		"| same | **0.700 s (1.04 S/B)** | 0.900 s mpi-best | 0.78× |",
		"| old | **0.700 s (1.04 S/B)** | 0.900 s mpi-best | 0.78× |",
		"2 CPUs (), load 0.50–3.50 with 2 CPU-bound processes beside,",
		"2 CPUs (), load 0.50–3.50, ",
		"[old.json](old.json): 0001-01-01 00:00 UTC; testbed, 8 hosts at 400 Mbit/s, 3 repetitions; 2 CPUs (),  ,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
