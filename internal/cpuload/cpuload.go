// Package cpuload makes a test's machine busy on purpose: it starts
// CPU-bound processes beside the test, so that a chaos or soak run that
// failed on a loaded machine can be run again under the same load.
//
// A test binary that imports this package becomes its own burner: Start
// runs the binary again with HOPLITE_CPULOAD_BURN set, and this package's
// init spins in that child instead of running any test. A burner stops by
// itself when its parent exits or after MaxBurn, whichever comes first,
// so no load outlives the run that asked for it.
//
// To make the machine slower rather than busier, confine the whole test
// to one CPU as well (the burners inherit the affinity and so compete
// with the cluster for that one CPU):
//
//	HOPLITE_CHAOS_LOAD=2 taskset -c 0 env GOMAXPROCS=1 go test -race -run TestChaos ./internal/member/
package cpuload

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvLoad names the environment variable the chaos suites read: the number
// of CPU-bound processes to run beside the cluster.
const EnvLoad = "HOPLITE_CHAOS_LOAD"

// envBurn marks a process started by Start as a burner.
const envBurn = "HOPLITE_CPULOAD_BURN"

// MaxBurn bounds a burner's life even if its parent's exit goes unnoticed.
const MaxBurn = 3 * time.Hour

func init() {
	if os.Getenv(envBurn) == "" {
		return
	}
	burn(os.Getppid(), MaxBurn)
	os.Exit(0)
}

// burn spins one CPU until the process's parent is no longer parent (it
// exited and the burner was reparented) or until limit has passed.
func burn(parent int, limit time.Duration) {
	runtime.GOMAXPROCS(1)
	end := time.Now().Add(limit)
	x := uint64(1)
	for {
		// About a millisecond of work between checks: cheap to check,
		// and a burner never outlives its parent by more than that.
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if os.Getppid() != parent || time.Now().After(end) {
			sink = x
			return
		}
	}
}

// sink keeps the spin loop's result alive so the compiler keeps the loop.
var sink uint64

// Load is a set of running burners.
type Load struct {
	procs []*exec.Cmd
	once  sync.Once
}

// Start runs n burners, each spinning one CPU. Stop ends them.
func Start(n int) (*Load, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cpuload: the test binary's path: %w", err)
	}
	l := &Load{}
	for i := range n {
		cmd := exec.Command(self, "-test.run=^$")
		cmd.Env = append(os.Environ(), envBurn+"=1", "GOMAXPROCS=1")
		if err := cmd.Start(); err != nil {
			l.Stop()
			return nil, fmt.Errorf("cpuload: starting burner %d of %d: %w", i+1, n, err)
		}
		l.procs = append(l.procs, cmd)
	}
	return l, nil
}

// Len is the number of burners started.
func (l *Load) Len() int { return len(l.procs) }

// Stop kills the burners and waits for them. It is safe to call twice.
func (l *Load) Stop() {
	l.once.Do(func() {
		for _, p := range l.procs {
			_ = p.Process.Kill()
		}
		for _, p := range l.procs {
			_ = p.Wait()
		}
	})
}

// FromEnv starts as many burners as HOPLITE_CHAOS_LOAD asks for (none if
// it is unset) and stops them when t ends. It logs the load average when
// t ends, so a run's report says how busy the machine was.
func FromEnv(t testing.TB) {
	t.Helper()
	v := os.Getenv(EnvLoad)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 64 {
		t.Fatalf("%s=%q: want a number of processes from 0 to 64", EnvLoad, v)
	}
	l, err := Start(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d CPU-bound processes beside the test (GOMAXPROCS=%d, %d CPUs usable)", EnvLoad, n, runtime.GOMAXPROCS(0), runtime.NumCPU())
	t.Cleanup(func() {
		t.Logf("%s: load average at the end: %s", EnvLoad, LoadAverage())
		l.Stop()
	})
}

// LoadAverage is the 1, 5 and 15 minute load averages as the kernel
// reports them, or "unknown" where /proc/loadavg does not exist.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
