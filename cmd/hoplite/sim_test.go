package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// A run with --kill says in its table when the hosts died: half the
// failure-free time by default, not 0.
func TestSimCommandSaysWhenItKilled(t *testing.T) {
	var out, errb bytes.Buffer
	args := []string{"--scenario", "reduce", "--nodes", "8", "--size", "1MiB", "--kill", "1"}
	if err := simCommand(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("sim: %v\n%s", err, errb.String())
	}
	m := regexp.MustCompile(`killed in 1 of 1 reps at ([0-9.]+)(m?s)`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no kill note in the table:\n%s", out.String())
	}
	if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
		t.Errorf("killed at %s%s, want half the failure-free time:\n%s", m[1], m[2], out.String())
	}
}
