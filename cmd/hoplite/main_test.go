package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// hoplite runs the command line in process with a deadline and returns the
// exit code and both outputs.
func hoplite(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestNoArgsPrintsUsage(t *testing.T) {
	code, stdout, stderr := hoplite(t)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, "usage: hoplite <command>") || !strings.Contains(stderr, "demo") || !strings.Contains(stderr, "bench") {
		t.Errorf("stderr has no usage:\n%s", stderr)
	}
	if stdout != "" {
		t.Errorf("stdout not empty: %q", stdout)
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := hoplite(t, "frobnicate")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "usage:") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		code, stdout, _ := hoplite(t, arg)
		if code != 0 {
			t.Errorf("%s: exit code %d, want 0", arg, code)
		}
		if !strings.Contains(stdout, "usage: hoplite <command>") {
			t.Errorf("%s: stdout has no usage:\n%s", arg, stdout)
		}
	}
}

func TestDemo(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-nodes", "4", "-size-mib", "2", "-link-mbps", "0", "-chunk-kib", "256",
		"-reduce-mib", "1", "-arrival-interval", "1ms")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	same := "all 3 receivers have the same 2097152 bytes (verified)"
	if n := strings.Count(stdout, same); n != 2 {
		t.Errorf("%q appears %d times, want 2 (tree and naive):\n%s", same, n, stdout)
	}
	for _, want := range []string{
		"Hoplite demo: 4 nodes, 2 MiB object",
		"== Broadcast, receiver-driven tree ==",
		"== Broadcast, naive (every receiver from the creator) ==",
		"who fetched from whom",
		"node-0 (creator)",
		"the tree is",
		"the speed of the naive pattern",
		"== Reduce: SUM of 2 of 4 float32 sources of 1 MiB",
		"cost model: T(1)=",
		"tree (root first; children reduce into their parent):",
		"tree reduce: ",
		"naive (gather all at the caller, reduce there): ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "(creator)"); n != 2 {
		t.Errorf("%d trees printed, want 2:\n%s", n, stdout)
	}
	// Every receiver appears in each printed tree.
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		if n := strings.Count(stdout, "─ "+node+"\n"); n != 2 {
			t.Errorf("%s appears in %d trees, want 2:\n%s", node, n, stdout)
		}
	}
	if n := strings.Count(stdout, "result checked element by element"); n != 2 {
		t.Errorf("%d checked reduce results, want 2 (tree and naive):\n%s", n, stdout)
	}
	// The printed tree holds exactly the reduced sources: 2 positions.
	if n := strings.Count(stdout, "position "); n != 2 {
		t.Errorf("%d tree positions printed, want 2:\n%s", n, stdout)
	}
	last := lastLine(stdout)
	if !strings.HasPrefix(last, "reduce tree ") || !strings.Contains(last, " vs naive gather ") {
		t.Errorf("last line is %q, want the reduce tree vs naive comparison", last)
	}
}

func TestDemoNeedsTwoNodes(t *testing.T) {
	code, _, stderr := hoplite(t, "demo", "-nodes", "1")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stderr, "hoplite demo:") || !strings.Contains(stderr, "at least 2 nodes") {
		t.Errorf("stderr has no error:\n%s", stderr)
	}
}

func TestDemoBadFlag(t *testing.T) {
	code, _, stderr := hoplite(t, "demo", "-no-such-flag")
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if !strings.Contains(stderr, "-no-such-flag") {
		t.Errorf("stderr does not name the bad flag:\n%s", stderr)
	}
}

func TestDemoHelp(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-h")
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, flag := range []string{"-nodes", "-size-mib", "-link-mbps", "-chunk-kib"} {
		if !strings.Contains(stderr, flag) {
			t.Errorf("flag help lacks %s:\n%s", flag, stderr)
		}
	}
	if strings.Contains(stdout, "Hoplite demo:") {
		t.Errorf("demo -h ran the demo:\n%s", stdout)
	}
}

func TestBenchBroadcast(t *testing.T) {
	code, stdout, stderr := hoplite(t, "bench", "broadcast", "-nodes", "3", "-size-mib", "1", "-reps", "1")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"broadcast 1 MiB to 2 receivers", "tree   median", "naive  median", "naive/tree median ratio: "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if !strings.HasPrefix(lastLine(stdout), "naive/tree median ratio: ") || !strings.HasSuffix(lastLine(stdout), "x") {
		t.Errorf("last line is %q, want the ratio", lastLine(stdout))
	}
}

func TestBenchNeedsScenario(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "allreduce"}} {
		code, stdout, stderr := hoplite(t, args...)
		if code == 0 {
			t.Errorf("%v: exit code 0, want non-zero", args)
		}
		if !strings.Contains(stderr, "usage: hoplite bench broadcast") {
			t.Errorf("%v: stderr has no bench usage:\n%s", args, stderr)
		}
		if strings.Contains(stdout, "median") {
			t.Errorf("%v: ran a benchmark:\n%s", args, stdout)
		}
	}
}

func TestBenchHelp(t *testing.T) {
	code, _, stderr := hoplite(t, "bench", "-h")
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if !strings.Contains(stderr, "usage: hoplite bench broadcast") {
		t.Errorf("stderr has no bench usage:\n%s", stderr)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "broadcast", "-reps", "0"},
		{"bench", "broadcast", "-nodes", "1"},
		{"bench", "broadcast", "-size-mib", "0"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), args, &out, &errb); code != 1 || !strings.Contains(errb.String(), "need -nodes >= 2") {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
