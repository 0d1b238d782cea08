package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/sirupsen/logrus"
)

// spinEnv makes this test binary a load process (TestMain), as `hoplite
// bench load-spin` is one.
const spinEnv = "HOPLITE_BENCH_TEST_SPIN"

func TestMain(m *testing.M) {
	if os.Getenv(spinEnv) == "1" {
		d := DefaultLoadFor
		for i, a := range os.Args {
			if a == "--for" && i+1 < len(os.Args) {
				if v, err := time.ParseDuration(os.Args[i+1]); err == nil {
					d = v
				}
			}
		}
		Spin(os.Stdin, time.Now().Add(d))
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// spinCommand is this test binary as a load process.
func spinCommand(t *testing.T) []string {
	t.Helper()
	t.Setenv(spinEnv, "1")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return []string{exe}
}

// running says whether pid is a live process (not a zombie: a reaped
// one has no /proc entry at all).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// The load processes run until the run stops them, and then they are
// gone: stopped by closing their input (not killed), and reaped.
func TestLoadProcessesStop(t *testing.T) {
	testutil.NeedFile(t, "/proc/self/stat", "the test reads the processes' states in /proc")
	l, err := startLoad(2, time.Hour, spinCommand(t))
	if err != nil {
		t.Fatal(err)
	}
	pids := l.pids()
	if len(pids) != 2 {
		t.Fatalf("%d load processes, want 2", len(pids))
	}
	for _, p := range pids {
		if !running(p) {
			t.Errorf("load process %d is not running", p)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if err := l.stop(ctx); err != nil {
		t.Errorf("stop: %v (want every process to end when its input closes)", err)
	}
	for _, p := range pids {
		if running(p) {
			t.Errorf("load process %d still runs after stop", p)
		}
	}
	if err := l.stop(ctx); err != nil {
		t.Errorf("a second stop: %v", err)
	}
}

// A load process left alone ends by itself at its bound, with status 0.
func TestLoadProcessesEndByThemselves(t *testing.T) {
	l, err := startLoad(2, 200*time.Millisecond, spinCommand(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.stop(context.Background()) }()
	deadline := time.After(60 * time.Second)
	for i, w := range l.waited {
		select {
		case err := <-w:
			if err != nil {
				t.Errorf("load process %d: %v", l.cmds[i].Process.Pid, err)
			}
			w <- err // stop reads it again
		case <-deadline:
			t.Fatalf("load process %d still runs 60 s after its 200 ms bound", l.cmds[i].Process.Pid)
		}
	}
}

// Spin returns when its input closes, long before its bound.
func TestSpinEndsWhenItsInputCloses(t *testing.T) {
	r, w := io.Pipe()
	done := make(chan struct{})
	go func() {
		Spin(r, time.Now().Add(time.Hour))
		close(done)
	}()
	_ = w.Close()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Spin still runs 60 s after its input closed")
	}
}

// Every recorded rep records the load average as it ended; a system whose
// median differs from ours's by a CPU or more is marked in the table, the
// RESULT line and by LoadDiffers, and the report gives the run's range.
// --load starts its processes and the run stops them.
func TestLoadRecordedAndMarked(t *testing.T) {
	testutil.NeedFile(t, "/bin/bash", "the stand-in peer scripts run in bash")
	dir := t.TempDir()
	log := &eventLog{path: filepath.Join(dir, "events")}
	peers := filepath.Join(dir, "peers")
	peerScript(t, peers, "mpi", log, "default", "4", 1, 2, 0)
	// The load as the last step left it: 3.5 after an MPI launch, 0.5
	// after ours's reps.
	loadAvg := func() (float64, bool) {
		b, err := os.ReadFile(log.path)
		if err != nil {
			return 0.25, true
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if strings.HasPrefix(lines[len(lines)-1], "mpi ") {
			return 3.5, true
		}
		return 0.5, true
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r, err := Run(ctx, Options{Scenario: "allreduce", Nodes: 3, Sizes: []int64{1 << 20}, Reps: 3,
		Peers: []string{"naive", "mpi"}, OpTimeout: 10 * time.Second, Progress: io.Discard,
		Load: 1, LoadCommand: spinCommand(t), loadAvg: loadAvg,
		Testbed: &Testbed{PeersDir: peers, LogDir: dir,
			Hosts:      []string{"198.18.77.1", "198.18.77.2", "198.18.77.3"},
			Namespaces: []string{"x-h0", "x-h1", "x-h2"}},
		newBackend: func(o *Options, s system, _ *logrus.Logger) (backend, error) {
			return &orderBackend{t: t, sys: s, log: log}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{SysOurs: 0.5, SysNaive: 0.5, SysMPIDefault: 3.5, SysMPIBest: 3.5} {
		res := result(t, r, name)
		if len(res.Load) != len(res.Times) || res.LoadMedian != want {
			t.Errorf("%s: load %v (median %v) for %d times, want one per rep, median %v", name, res.Load, res.LoadMedian, len(res.Times), want)
		}
	}
	if r.Load.Procs != 1 || !r.Load.Measured || r.Load.Min != 0.5 || r.Load.Max != 3.5 || r.Load.CPUs < 1 || r.Warmup != 0 {
		t.Errorf("the run's load %+v, warm-up %d", r.Load, r.Warmup)
	}
	lines := r.ResultLines()
	if len(lines) != 1 || !resultLine.MatchString(lines[0]) ||
		!strings.Contains(lines[0], fmt.Sprintf(" cpus=%d load=0.50 load-differs=mpi-default:3.50,mpi-best:3.50", r.Machine.CPUs)) ||
		!strings.Contains(lines[0], " cpu=mpi-default:0.2s,mpi-best:0.2s ") {
		t.Errorf("RESULT lines %q", lines)
	}
	var table strings.Builder
	r.WriteTable(&table)
	for _, want := range []string{"3.50*", "on " + fmt.Sprint(r.Machine.CPUs) + " CPUs, with 1 CPU-bound processes beside the cluster (--load)", "no warm-up"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "0.50*") {
		t.Errorf("the table marks a system whose load is ours's:\n%s", table.String())
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "warm-up: none") && strings.Contains(n, "--load 1") }) {
		t.Errorf("notes %q lack the warm-up and load note", r.Notes)
	}
	// The JSON reads back.
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Load != r.Load || !slices.Equal(result(t, back, SysMPIBest).Load, result(t, r, SysMPIBest).Load) {
		t.Errorf("read back: load %+v, mpi-best %v", back.Load, result(t, back, SysMPIBest).Load)
	}
}

func TestLoadDiffers(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		cpus int
		want bool
	}{
		{0.5, 1.4, 2, false}, {0.5, 1.5, 2, true}, {3, 1, 2, true}, {0, 0, 2, false},
		{2, 4.5, 16, false}, {2, 6, 16, true}, // a quarter of 16 CPUs
		{19.37, 18.97, 2, false}, {10, 12.4, 2, false}, {10, 14, 2, true}, // a quarter of the larger
	} {
		if got := LoadDiffers(c.a, c.b, c.cpus); got != c.want {
			t.Errorf("LoadDiffers(%v, %v, %d) = %v", c.a, c.b, c.cpus, got)
		}
	}
}

// countingBackend counts the clusters opened and closed.
type countingBackend struct {
	*orderBackend
	closed *int
}

func (b countingBackend) Close() { *b.closed++ }

// --fresh gives every recorded rep of ours's systems a cluster of its own,
// its warm-ups (if any) on it first, and closes it after the rep.
func TestFreshClusterPerRep(t *testing.T) {
	for _, warmup := range []int{0, 1} {
		t.Run(fmt.Sprintf("warmup=%d", warmup), func(t *testing.T) {
			dir := t.TempDir()
			log := &eventLog{path: filepath.Join(dir, "events")}
			opened, closed := map[string]int{}, 0
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			r, err := Run(ctx, Options{Scenario: "allreduce", Nodes: 3, Sizes: []int64{1 << 20}, Reps: 3, Warmup: warmup, Fresh: true,
				Peers: []string{"naive"}, OpTimeout: 10 * time.Second, Progress: io.Discard,
				newBackend: func(o *Options, s system, _ *logrus.Logger) (backend, error) {
					opened[s.name]++
					if err := log.add(s.name + " open"); err != nil {
						return nil, err
					}
					return countingBackend{&orderBackend{t: t, sys: s, log: log}, &closed}, nil
				}})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{SysOurs, SysReduceBcast, SysNaive} {
				if opened[name] != 3 {
					t.Errorf("%s: %d clusters opened, want 3 (one per rep)", name, opened[name])
				}
				if res := result(t, r, name); !res.ok() || !nearly(res.Times, secondsOf(orderTimes[name])) {
					t.Errorf("%s: %s %q times %v", name, res.Status, res.Reason, res.Times)
				}
			}
			if closed != 9 {
				t.Errorf("%d clusters closed, want 9", closed)
			}
			// Each open is followed by its warm-ups and one recorded rep.
			var want, got []string
			for k := range 3 {
				round := []string{SysOurs, SysReduceBcast, SysNaive}
				for _, s := range append(round[k:], round[:k]...) {
					want = append(want, s+" open")
					for range warmup {
						want = append(want, s+" warm-up")
					}
					want = append(want, s)
				}
			}
			for _, l := range log.lines(t) {
				if strings.HasSuffix(l, " open") {
					got = append(got, l)
				} else {
					got = append(got, steps([]string{l})...)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("the run's steps\n%q\nwant\n%q", got, want)
			}
			if !r.Fresh || !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "--fresh: ") }) {
				t.Errorf("fresh %v, notes %q", r.Fresh, r.Notes)
			}
		})
	}
}

// --load's bounds, and --profile is not for --fresh runs.
func TestLoadAndFreshOptions(t *testing.T) {
	for _, o := range []Options{
		{Scenario: "broadcast", Load: -1},
		{Scenario: "broadcast", Load: maxLoad + 1},
		{Scenario: "broadcast", Fresh: true, Profile: "/tmp/x", Testbed: &Testbed{}},
	} {
		if _, err := o.withDefaults(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}
