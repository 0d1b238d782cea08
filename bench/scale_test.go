package bench

import (
	"os"
	"path/filepath"
	"testing"
)

func TestScalePointsNormalizeByIdeal(t *testing.T) {
	mk := func(n int, ideal, ours, mpi float64) *Report {
		return &Report{Nodes: n, Results: []Result{
			{Scenario: "broadcast", System: SysOurs, Status: StatusOK, Median: ours, Min: ours * 0.9, Max: ours * 1.1, Ideal: ideal},
			{Scenario: "broadcast", System: SysMPIBest, Status: StatusOK, Median: mpi, Min: mpi, Max: mpi, Ideal: ideal},
			{Scenario: "broadcast", System: SysNaive, Status: StatusOK, Median: 9, Min: 9, Max: 9, Ideal: ideal},
			{Scenario: "broadcast", System: SysMPIDefault, Status: StatusSkipped, Ideal: ideal},
		}}
	}
	// N = 16 ran at half the bandwidth: twice the ideal.
	pts := ScalePoints([]*Report{mk(16, 2, 2.4, 3.2), mk(8, 1, 1.1, 1.3)}, []string{SysOurs, SysMPIBest, SysMPIDefault})
	want := []ScalePoint{
		{"broadcast", SysMPIBest, 8, 0, 1.3, 1.3, 1.3},
		{"broadcast", SysMPIBest, 16, 0, 1.6, 1.6, 1.6},
		{"broadcast", SysOurs, 8, 0, 1.1, 0.99, 1.21},
		{"broadcast", SysOurs, 16, 0, 1.2, 1.08, 1.32},
	}
	if len(pts) != len(want) {
		t.Fatalf("points %+v, want %+v", pts, want)
	}
	for i, p := range pts {
		w := want[i]
		if p.Scenario != w.Scenario || p.System != w.System || p.Nodes != w.Nodes || !near(p.Ratio, w.Ratio) || !near(p.Lo, w.Lo) || !near(p.Hi, w.Hi) {
			t.Errorf("point %d: %+v, want %+v", i, p, w)
		}
	}
	path := filepath.Join(t.TempDir(), "scale.png")
	if err := PlotScale(pts, "broadcast 32 MiB", path); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 1000 {
		t.Fatalf("plot: %v %v", st, err)
	}
	if err := PlotScale(nil, "empty", path); err == nil {
		t.Error("an empty plot was drawn")
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
