package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMPIBenchSkipsASlowRepetition: the MPI peer's program, run by two
// local ranks, stops after a repetition longer than --max-rep-s and says
// SKIPPED (the best sweep's way to drop a hopeless algorithm instead of
// timing all its repetitions), and times every repetition under a limit
// it does not reach, as ours is timed.
func TestMPIBenchSkipsASlowRepetition(t *testing.T) {
	for _, tool := range []string{"mpicc", "mpirun"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("skipped: %s is not on PATH (bench/peers/install installs OpenMPI, as .ci/run does)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "mpibench")
	if out, err := exec.CommandContext(ctx, "mpicc", "-O2", "-Wall", "-Wextra", "-o", bin, filepath.Join("peers", "mpi", "mpibench.c")).CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, out)
	}
	run := func(limit string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "mpirun", "--oversubscribe", "-np", "2", "--mca", "btl", "tcp,self",
			"--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo", "--bind-to", "none",
			bin, "--op", "allreduce", "--size", "4096", "--reps", "3", "--max-rep-s", limit)
		if os.Geteuid() == 0 {
			cmd.Args = append(cmd.Args[:1], append([]string{"--allow-run-as-root"}, cmd.Args[1:]...)...)
			cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		}
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("mpirun --max-rep-s %s: %v\n%s", limit, err, out)
		}
		return string(out)
	}
	if out := run("0.000000001"); !strings.Contains(out, "SKIPPED peer=mpi op=allreduce nodes=2 ") || strings.Contains(out, "RESULT ") {
		t.Errorf("a limit every repetition exceeds: want a SKIPPED line and no RESULT, got %q", out)
	}
	out := run("60")
	if !strings.Contains(out, "RESULT peer=mpi op=allreduce nodes=2 ") || !strings.Contains(out, " reps=3 ") || strings.Contains(out, "SKIPPED") {
		t.Errorf("a limit no repetition reaches: want a RESULT of 3 reps, got %q", out)
	}
	// Timed as ours is: from the first rank's scheduled start to the last
	// rank's end, which no rank's own time and no start skew can exceed
	// in any repetition, so neither can their medians.
	rs, err := FindPeerResults(strings.NewReader(out))
	if err != nil || len(rs) != 1 {
		t.Fatalf("RESULT lines of %q: %+v, %v", out, rs, err)
	}
	if r := rs[0]; r.Timing != TimingScheduled || !r.HasOwn || r.Own > r.Median || r.Skew > r.Median {
		t.Errorf("want timing=scheduled with own and skew at most the median, got %+v", r)
	}
}
