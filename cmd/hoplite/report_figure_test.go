package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// The headline run of a 32 MiB broadcast to 7, and a run of another
// machine's.
const (
	figureRun       = "testbed-broadcast-32MiB-n8-2026-11-25T1735.json"
	otherMachineRun = "testbed-broadcast-32MiB-n8-machine-2026-11-27T0328.json"
)

// TestBenchFigureIsTheReports: a figure after a marker is put right
// whatever it was (edited by hand, or none yet): a system's median as
// the tables print it, or two systems' ratio.
func TestBenchFigureIsTheReports(t *testing.T) {
	results := filepath.Join("..", "..", "bench", "results")
	median := figureBegin + figureRun + " broadcast 32MiB ours -->"
	ratio := figureBegin + figureRun + " broadcast 32MiB ours/mpi-best -->"
	for _, tc := range []struct{ doc, want string }{
		{"took " + median + "0.726 s here", "took " + median + "0.726 s here"},
		{"took " + median + "9.999 s here", "took " + median + "0.726 s here"},
		{"took " + median + " here", "took " + median + "0.726 s here"},
		{"at " + ratio + "1.23× MPI's", "at " + ratio + "0.85× MPI's"},
		{"from " + figureBegin + figureRun + " broadcast 32MiB ours:min -->1 s to " + figureBegin + figureRun + " broadcast 32MiB ours:max -->1 s",
			"from " + figureBegin + figureRun + " broadcast 32MiB ours:min -->0.719 s to " + figureBegin + figureRun + " broadcast 32MiB ours:max -->0.727 s"},
		// In a code block a marker is an example, left as it is.
		{"```\n" + figureBegin + "FILE SCENARIO SIZE SYSTEM -->0.1 s\n```\nit took " + median + "1 s",
			"```\n" + figureBegin + "FILE SCENARIO SIZE SYSTEM -->0.1 s\n```\nit took " + median + "0.726 s"},
	} {
		got, err := regenerateFigures(tc.doc, results)
		if err != nil {
			t.Fatalf("%q: %v", tc.doc, err)
		}
		if got != tc.want {
			t.Errorf("regenerateFigures(%q) = %q, want %q", tc.doc, got, tc.want)
		}
	}
}

// TestBenchFigureMarkerErrors: a marker that names no result, that is not
// a marker's shape, or that begins a line (where Markdown would show it
// as a block of its own) fails the check instead of standing unchecked.
func TestBenchFigureMarkerErrors(t *testing.T) {
	results := filepath.Join("..", "..", "bench", "results")
	for _, doc := range []string{
		"it took " + figureBegin + figureRun + " broadcast 32MiB gloo-best -->0.8 s",     // no such system in the run
		"it took " + figureBegin + figureRun + " reduce 32MiB ours -->0.8 s",             // no such scenario
		"it took " + figureBegin + "no-such-run.json broadcast 32MiB ours -->0.8 s",      // no such file
		"it took " + figureBegin + figureRun + " broadcast ours -->0.8 s",                // a field missing
		"it took " + figureBegin + figureRun + " broadcast 32MiB ours/gloo-best -->0.8×", // no such divisor
		"it took " + figureBegin + figureRun + " broadcast 32MiB ours:p99 -->0.8 s",      // no such statistic
		"took\n  " + figureBegin + figureRun + " broadcast 32MiB ours -->0.726 s",        // begins a line
	} {
		if got, err := regenerateFigures(doc, results); err == nil {
			t.Errorf("regenerateFigures(%q) = %q, want an error", doc, got)
		}
	}
}

// TestBenchTableHoldsOneMachine: a table whose rows ran on two machines
// is refused, not printed as one comparison.
func TestBenchTableHoldsOneMachine(t *testing.T) {
	results := filepath.Join("..", "..", "bench", "results")
	table := reportTable{Name: "mixed", Rows: []reportRow{
		{Label: "a", File: figureRun, Scenario: "broadcast", Size: "32MiB"},
		{Label: "b", File: otherMachineRun, Scenario: "broadcast", Size: "32MiB"},
	}}
	if _, err := renderTable(results, table, "."); err == nil || !strings.Contains(err.Error(), "one machine") {
		t.Errorf("a table of two machines' runs: %v, want an error naming one machine", err)
	}
	table.Rows = table.Rows[:1]
	if _, err := renderTable(results, table, "."); err != nil {
		t.Errorf("a table of one run: %v", err)
	}
}
