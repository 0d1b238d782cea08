package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// hoplite bench report compares ours with a peer timed alike: the best
// peer is the fastest of those timed as ours was; a peer timed from its
// ranks' barrier exits (the peers before they were timed like ours) is
// said so beside the ratio, and below bench.TimingMatters gets no ratio
// at all.
func TestBenchReportComparesLikeWithLike(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int64, ours float64, peers ...bench.Result) {
		r := &bench.Report{Scenario: "broadcast", Mode: "testbed", Command: []string{"hoplite", "bench", "broadcast"},
			Machine: bench.Machine{CPUs: 2}, Nodes: 8, Bandwidth: "400 Mbit/s", Reps: 5, Sizes: []int64{size},
			Results: []bench.Result{{Scenario: "broadcast", Size: size, System: "ours", Status: bench.StatusOK, Median: ours,
				Timing: bench.TimingScheduled}}}
		for _, p := range peers {
			p.Scenario, p.Size, p.Status = "broadcast", size, bench.StatusOK
			r.Results = append(r.Results, p)
		}
		if err := r.WriteJSON(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Before the peers were timed like ours: no timing in the report.
	write("old-small.json", 1024, 0.0007, bench.Result{System: "mpi-default", Median: 0.00025})
	write("old-large.json", 32<<20, 0.7, bench.Result{System: "mpi-best", Median: 0.9})
	// A faster peer timed otherwise does not displace one timed alike.
	write("mixed.json", 1024, 0.0007, bench.Result{System: "mpi-default", Median: 0.0002},
		bench.Result{System: "gloo-default", Median: 0.00035, Timing: bench.TimingScheduled})
	write("alike.json", 1024, 0.0007, bench.Result{System: "mpi-default", Median: 0.00035, Timing: bench.TimingScheduled})
	tb := reportTable{Name: "t", Rows: []reportRow{
		{Label: "old small", File: "old-small.json", Scenario: "broadcast", Size: "1KiB"},
		{Label: "old large", File: "old-large.json", Scenario: "broadcast", Size: "32MiB"},
		{Label: "mixed", File: "mixed.json", Scenario: "broadcast", Size: "1KiB"},
		{Label: "alike", File: "alike.json", Scenario: "broadcast", Size: "1KiB"},
	}}
	out, err := renderTable(dir, tb, ".")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| old small | **0.7 ms** | 0.25 ms mpi-default | — (mpi-default timed from barrier exits) |",
		"| old large | **0.700 s** | 0.900 s mpi-best | 0.78× (mpi-best timed from barrier exits) |",
		"| mixed | **0.7 ms** | 0.35 ms gloo-default | 2.00× |",
		"| alike | **0.7 ms** | 0.35 ms mpi-default | 2.00× |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
