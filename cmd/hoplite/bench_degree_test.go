package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/internal/testutil"
)

// --degree names the chain-leaf shape beside the degrees, and "all" (the
// degree scenario's default) compares it too.
func TestParseDegreesChainLeaf(t *testing.T) {
	for _, c := range []struct {
		in, scenario string
		want         []int
	}{
		{"", "degree", []int{1, 2, bench.DegreeN, bench.DegreeChainLeaf}},
		{"all", "reduce", []int{1, 2, bench.DegreeN, bench.DegreeChainLeaf}},
		{"chain-leaf", "degree", []int{bench.DegreeChainLeaf}},
		{"2, chain-leaf,n", "async", []int{2, bench.DegreeChainLeaf, bench.DegreeN}},
		{"chosen", "degree", []int{}},
		{"1,2,n", "failure", []int{1, 2, bench.DegreeN}},
		{"2,chosen,chain-leaf", "failure", []int{2, bench.DegreeChainLeaf}}, // chosen: always measured
		{"chosen", "failure", []int{}},
		{"", "failure", nil},
	} {
		got, err := parseDegrees(c.in, c.scenario)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q (%s): %v %v, want %v", c.in, c.scenario, got, err, c.want)
		}
	}
	if _, err := parseDegrees("2", "broadcast"); err == nil {
		t.Error("--degree for broadcast: no error")
	}
	for _, bad := range []string{"chain", "chain-leaf,0", "leaf"} {
		if _, err := parseDegrees(bad, "degree"); err == nil || !strings.Contains(err.Error(), "chain-leaf") {
			t.Errorf("%q: error %v, want one that names chain-leaf", bad, err)
		}
	}
}

// `bench failure --degree` measures each forced degree at both ends, in
// the reduce only, and prints the trade-off: a real in-process run, so
// d=n, whose failure-reduce tree of N-1 positions the coordinator caps
// at degree N-1, must pass the check that the degree took.
func TestBenchFailureDegrees(t *testing.T) {
	dir := t.TempDir()
	// A fresh cluster per repetition: longer than hoplite's 30 s under
	// -race on a loaded machine.
	ctx, cancel := context.WithTimeout(t.Context(), 120*time.Second)
	defer cancel()
	var out, errb testutil.SyncBuffer
	code := run(ctx, []string{"bench", "failure", "--nodes", "4", "--size", "1MiB", "--bandwidth", "1gbit", "--reps", "1",
		"--warmup", "0", "--degree", "n,chosen", "--json", dir + "/f.json"}, &out, &errb)
	stdout, stderr := out.String(), errb.String()
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, re := range []string{
		`(?m)^trade-off: each shape failure-free, and with host 1 killed at 50 % of that shape's own failure-free median`,
		`(?m)^failure-reduce\s+1MiB\s+ours\s+(degree \d|inline)\s+\S+s\s+\S+s\s+[0-9.]+x\s+1\.00x\s+[0-9.]+x\s+killed at \S+s$`,
		`(?m)^failure-reduce\s+1MiB\s+d=4\s+degree 3\s+\S+s\s+\S+s\s+[0-9.]+x\s+[0-9.]+x\s+[0-9.]+x\s+killed at \S+s$`,
		`(?m)^failure-broadcast 1MiB: d=4 n/a: a broadcast has no reduce tree`,
		`(?m)^RESULT scenario=failure-broadcast nodes=4 size=1048576 ours=\S+s ideal=\S+s ours-failure=\S+s d=4=skipped d=4-failure=skipped( cpu=\S+)? cpus=\d+ load=[0-9.]+( load-differs=\S+)? ours-failure/ours=[0-9.]+x$`,
		`(?m)^RESULT scenario=failure-reduce nodes=4 size=1048576 ours=\S+s ideal=\S+s ours-failure=\S+s d=4=\S+s d=4-failure=\S+s( cpu=\S+)? cpus=\d+ load=[0-9.]+( load-differs=\S+)? ours-failure/ours=[0-9.]+x d=4-failure/d=4=[0-9.]+x$`,
	} {
		if !regexp.MustCompile(re).MatchString(stdout) {
			t.Errorf("stdout lacks %s:\n%s\nstderr:\n%s", re, stdout, stderr)
		}
	}
	r, err := bench.ReadJSON(dir + "/f.json")
	if err != nil {
		t.Fatal(err)
	}
	ok := 0
	for _, to := range r.TradeOffs {
		if to.Status == bench.StatusOK && to.FailureOverFree > 0 && to.FreeOverChosen > 0 && to.FailureOverChosen > 0 && to.KillAt > 0 {
			ok++
		}
	}
	if ok != 3 { // broadcast: ours; reduce: ours, d=4
		t.Errorf("%d complete trade-offs, want 3: %+v", ok, r.TradeOffs)
	}
}
