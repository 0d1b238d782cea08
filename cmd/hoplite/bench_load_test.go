package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// loadSpinners are the processes running `bin bench load-spin`, by their
// command lines in /proc.
func loadSpinners(t *testing.T, bin string) []string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue // gone meanwhile
		}
		if bytes.HasPrefix(b, []byte(bin+"\x00bench\x00load-spin\x00")) {
			out = append(out, d)
		}
	}
	return out
}

// `hoplite bench --load 1` runs one CPU-bound process beside the cluster
// for the run, records the load in its results, and leaves no process
// behind; the default is no warm-up.
func TestBenchLoadProcessesStopWithTheRun(t *testing.T) {
	testutil.NeedFile(t, "/proc/self/cmdline", "the test finds the load processes there")
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "broadcast", "--nodes", "3", "--size", "64KiB", "--reps", "2",
		"--bandwidth", "4gbit", "--load", "1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"with 1 CPU-bound processes beside the cluster (--load)", "no warm-up: every recorded rep", " load="} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(stderr.String(), "--load 1: 1 CPU-bound processes ran beside the cluster") {
		t.Errorf("stderr lacks the load note:\n%s", stderr.String())
	}
	if left := loadSpinners(t, bin); len(left) > 0 {
		t.Errorf("load processes still run after the bench ended: %q", left)
	}
}

// A load process ends by itself at its bound.
func TestBenchLoadSpinEndsByItself(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "bench", "load-spin", "--for", "100ms")
	cmd.Stdin = strings.NewReader("") // its input closes at once: it ends on either
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// With an input that stays open, only the bound ends it.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cmd = exec.CommandContext(ctx, bin, "bench", "load-spin", "--for", "200ms")
	cmd.Stdin = r
	err = cmd.Run()
	r.Close()
	if err != nil || ctx.Err() != nil {
		t.Fatalf("load-spin --for 200ms with its input open: %v (context: %v)", err, ctx.Err())
	}
	if code, _, _ := hoplite(t, "bench", "load-spin", "--for", "0s"); code != 2 {
		t.Errorf("load-spin --for 0s: exit %d, want 2", code)
	}
}
