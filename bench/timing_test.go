package bench

import (
	"bytes"
	"strings"
	"testing"
)

// How a result was timed: what it says, or for a report written before
// results said it, what its system's name implies.
func TestTimingMethod(t *testing.T) {
	for _, c := range []struct {
		system, timing, want string
	}{
		{SysOurs, "", TimingScheduled},
		{SysDataRTT, "", TimingScheduled},
		{SysEchoRTT, "", TimingScheduled},
		{SysMPIDefault, "", TimingBarrier},
		{SysGlooBest, "", TimingBarrier},
		{SysDask, "", TimingClient},
		{SysMPIBest, TimingScheduled, TimingScheduled},
		{SysGlooDefault, TimingScheduled, TimingScheduled},
	} {
		if got := (Result{System: c.system, Timing: c.timing}).TimingMethod(); got != c.want {
			t.Errorf("%s with timing %q: %q, want %q", c.system, c.timing, got, c.want)
		}
	}
}

// A peer timed otherwise than ours is marked at every size, and not
// compared at all under TimingMatters, where the difference between the
// methods is of the order of the figures; one timed alike is compared
// as before.
func TestCompareTiming(t *testing.T) {
	small := Result{System: SysOurs, Timing: TimingScheduled, Median: 0.0007}
	large := Result{System: SysOurs, Timing: TimingScheduled, Median: 0.7}
	old := Result{System: SysMPIDefault, Median: 0.0003}
	alike := Result{System: SysMPIDefault, Timing: TimingScheduled, Median: 0.0003}
	if d, refuse := CompareTiming(small, old); d != "mpi-default timed from barrier exits" || !refuse {
		t.Errorf("1 KiB against a barrier-timed peer: %q, refuse %v; want a note and a refusal", d, refuse)
	}
	if d, refuse := CompareTiming(large, old); d == "" || refuse {
		t.Errorf("32 MiB against a barrier-timed peer: %q, refuse %v; want a note, no refusal", d, refuse)
	}
	if d, refuse := CompareTiming(small, alike); d != "" || refuse {
		t.Errorf("1 KiB against a peer timed alike: %q, refuse %v; want neither", d, refuse)
	}
	if d, _ := CompareTiming(large, Result{System: SysDask, Median: 1}); d != "dask timed by its client" {
		t.Errorf("dask: %q", d)
	}
}

// The report gives no ratio to a small comparison made unlike, marks
// it in its table and its RESULT line, and compares a peer timed alike.
func TestReportComparesLikeWithLike(t *testing.T) {
	r := &Report{Scenario: "broadcast", Nodes: 8, Machine: Machine{CPUs: 2}, Results: []Result{
		{Scenario: "broadcast", Size: 1024, System: SysOurs, Status: StatusOK, Timing: TimingScheduled, Median: 0.0008, Min: 0.0007, Max: 0.001},
		{Scenario: "broadcast", Size: 1024, System: SysMPIDefault, Status: StatusOK, Median: 0.0002, Min: 0.0002, Max: 0.0003},
		{Scenario: "broadcast", Size: 1024, System: SysMPIBest, Status: StatusOK, Timing: TimingScheduled, Median: 0.0004, Min: 0.0003, Max: 0.0005},
		{Scenario: "broadcast", Size: 32 << 20, System: SysOurs, Status: StatusOK, Timing: TimingScheduled, Median: 0.72, Min: 0.7, Max: 0.8},
		{Scenario: "broadcast", Size: 32 << 20, System: SysMPIDefault, Status: StatusOK, Median: 0.9, Min: 0.85, Max: 0.95},
	}}
	r.ratios()
	ratio := func(size int64, system string) float64 {
		for _, res := range r.Results {
			if res.Size == size && res.System == system {
				return res.Ratio
			}
		}
		t.Fatalf("no %s at %d", system, size)
		return 0
	}
	if got := ratio(1024, SysMPIDefault); got != 0 {
		t.Errorf("1 KiB mpi-default, timed from barrier exits: ratio %v, want none", got)
	}
	if got := ratio(1024, SysMPIBest); got != 0.5 {
		t.Errorf("1 KiB mpi-best, timed alike: ratio %v, want 0.5", got)
	}
	if got := ratio(32<<20, SysMPIDefault); got != 1.25 {
		t.Errorf("32 MiB mpi-default: ratio %v, want 1.25", got)
	}
	var table bytes.Buffer
	r.WriteTable(&table)
	for _, line := range strings.Split(table.String(), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != SysMPIDefault && f[2] != SysMPIBest {
			continue
		}
		marked := strings.Contains(line, "mpi-default timed from barrier exits")
		refused := strings.Contains(line, "not compared with ours at this size")
		switch {
		case f[1] == "1KiB" && f[2] == SysMPIDefault:
			if !marked || !refused {
				t.Errorf("1 KiB mpi-default's line says neither how it was timed nor that it is not compared: %q", line)
			}
		case f[1] == "32MiB":
			if !marked || refused || !strings.Contains(line, "1.25x") {
				t.Errorf("32 MiB mpi-default's line: %q; want its ratio and how it was timed", line)
			}
		default:
			if marked || refused {
				t.Errorf("mpi-best, timed alike, is marked: %q", line)
			}
		}
	}
	lines := r.ResultLines()
	if len(lines) != 2 || !strings.Contains(lines[0], " timing-differs=mpi-default:barrier") || !strings.Contains(lines[1], " timing-differs=mpi-default:barrier") {
		t.Errorf("RESULT lines %q: want timing-differs=mpi-default:barrier in both", lines)
	}
}
