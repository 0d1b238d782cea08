package sim

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestTestbedMediansAreTheirReports: every reference the validation
// compares with is the figure its report in bench/results holds (the
// median, and the fastest and slowest where it names them), so that the
// references and docs/simulator.md's table cannot drift from the
// measurements they cite.
func TestTestbedMediansAreTheirReports(t *testing.T) {
	for _, m := range TestbedMedians {
		path := filepath.Join("..", "bench", "results", filepath.FromSlash(m.File))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The fields of a hoplite bench report that a reference takes.
		var report struct {
			Results []struct {
				Scenario string  `json:"scenario"`
				Size     int64   `json:"size"`
				System   string  `json:"system"`
				Status   string  `json:"status"`
				Median   float64 `json:"median_s"`
				Min      float64 `json:"min_s"`
				Max      float64 `json:"max_s"`
			} `json:"results"`
		}
		if err := json.Unmarshal(b, &report); err != nil {
			t.Fatalf("%s: %v", m.File, err)
		}
		// The references are written to the microsecond.
		same := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6 }
		// Ours as the cost model shaped it, or forced to reduce, then
		// broadcast, or to slice: the systems a reference can be.
		found := false
		for _, r := range report.Results {
			if r.Scenario != m.Scenario || r.Size != m.Size || r.Status != "ok" || !slices.Contains([]string{"ours", "reduce-bcast", "sliced"}, r.System) {
				continue
			}
			if same(r.Median, m.Median) && (m.Min == 0 || same(r.Min, m.Min)) && (m.Max == 0 || same(r.Max, m.Max)) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s N=%d S=%d: no result in %s has median %v (min %v, max %v)", m.Scenario, m.Nodes, m.Size, m.File, m.Median, m.Min, m.Max)
		}
	}
}
