package cpuload

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func childCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano())
}

func TestStartBurnsCPUUntilStopped(t *testing.T) {
	before := childCPU(t)
	l, err := Start(1)
	if err != nil {
		t.Fatal(err)
	}
	if l.Len() != 1 {
		t.Fatalf("Len %d, want 1", l.Len())
	}
	// Wait for the burner to have used some CPU: an event (its usage),
	// not a fixed sleep, bounded by a deadline.
	deadline := time.Now().Add(20 * time.Second)
	pid := l.procs[0].Process.Pid
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || time.Now().After(deadline) {
			break // not Linux, or too slow to tell: the rusage check below decides
		}
		if utime(string(b)) > 5 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.Stop()
	l.Stop() // twice is safe
	if got := childCPU(t) - before; got <= 0 {
		t.Fatalf("the burner used no CPU (children's user time grew by %v)", got)
	}
	if err := l.procs[0].Process.Signal(syscall.Signal(0)); err == nil {
		t.Fatal("the burner still runs after Stop")
	}
}

func TestBurnStopsWhenItsParentIsGone(t *testing.T) {
	done := make(chan struct{})
	go func() {
		burn(os.Getppid()+1, time.Hour) // not our parent: as if reparented
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("burn did not notice its parent was gone")
	}
}

func TestBurnStopsAtItsLimit(t *testing.T) {
	done := make(chan struct{})
	go func() {
		burn(os.Getppid(), 10*time.Millisecond)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("burn ran past its limit")
	}
}

func TestFromEnvRejectsABadCount(t *testing.T) {
	t.Setenv(EnvLoad, "many")
	ft := &fatalRecorder{TB: t}
	func() {
		defer func() { _ = recover() }()
		FromEnv(ft)
	}()
	if !ft.failed {
		t.Fatal("FromEnv accepted HOPLITE_CHAOS_LOAD=many")
	}
}

// fatalRecorder records a Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	failed bool
}

func (f *fatalRecorder) Fatalf(string, ...any) { f.failed = true; panic("fatal") }
func (f *fatalRecorder) Helper()               {}

// utime is field 14 of /proc/PID/stat (clock ticks in user mode).
func utime(stat string) int {
	// The command name (field 2) is in parentheses and may hold spaces.
	i := len(stat) - 1
	for i >= 0 && stat[i] != ')' {
		i--
	}
	field, n := 2, 0
	for _, c := range stat[i+1:] {
		switch {
		case c == ' ':
			if field == 14 {
				return n
			}
			field++
			n = 0
		case c >= '0' && c <= '9':
			n = n*10 + int(c-'0')
		}
	}
	return n
}
