package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// TestSimCommand: hoplite sim prints a RESULT line per scenario and N
// and writes hoplite bench's reports, the same bytes for the same seed.
func TestSimCommand(t *testing.T) {
	dir := t.TempDir()
	var first []byte
	for i := 0; i < 2; i++ {
		path := filepath.Join(dir, "sim.json")
		var out, errb bytes.Buffer
		args := []string{"--scenario", "broadcast,notice", "--nodes", "4,8", "--size", "1MiB", "--json", path}
		if err := simCommand(context.Background(), args, &out, &errb); err != nil {
			t.Fatalf("sim: %v\n%s", err, errb.String())
		}
		if n := strings.Count(out.String(), "RESULT scenario="); n != 4 {
			t.Errorf("%d RESULT lines, want 4:\n%s", n, out.String())
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var reports []*bench.Report
		if err := json.Unmarshal(b, &reports); err != nil || len(reports) != 2 || reports[1].Nodes != 8 {
			t.Fatalf("reports: %v, %d of them", err, len(reports))
		}
		if i == 0 {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Errorf("the second run's JSON differs from the first")
		}
	}
}
