package main

import (
	"context"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchOpsFlagErrors: a bad command line is a usage error (exit 2)
// that names the flag, before anything starts.
func TestBenchOpsFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "ops", "--phase", "0s"}, "--phase"},
		{[]string{"bench", "ops", "--callers", "1,x"}, "-callers"},
		{[]string{"bench", "ops", "--size", "1QB"}, "-size"},
		{[]string{"bench", "ops", "extra"}, "unexpected arguments"},
	} {
		code, _, stderr := hoplite(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestBenchOps runs `hoplite bench ops` (a built binary: the processes
// mode starts a `hoplite node` from its own executable) on a tiny run of
// both modes. Every mode, caller count and operation has its table row
// and RESULT line, and each RESULT line's figures follow from its own
// counts: ops/s from ops and elapsed, cpu/op from ops/cpu-s, and
// p50/ping from the two p50s.
func TestBenchOps(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "bench", "ops", "--phase", "20ms", "--callers", "1,2", "--size", "1KiB", "--max-ops", "40").CombinedOutput()
	if err != nil {
		t.Fatalf("bench ops: %v\n%s", err, out)
	}
	rows := map[string]int{}
	results := 0
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 11 && (f[0] == "in-process" || f[0] == "processes") {
			rows[f[0]+" "+f[1]+" x"+f[3]]++
		}
		if !strings.HasPrefix(line, "RESULT ops ") {
			continue
		}
		results++
		kv := map[string]string{}
		for _, p := range f[2:] {
			k, v, _ := strings.Cut(p, "=")
			kv[k] = v
		}
		num := func(k string) float64 {
			v, err := strconv.ParseFloat(kv[k], 64)
			if err != nil {
				t.Fatalf("%s in %q: %v", k, line, err)
			}
			return v
		}
		// Within the printed digits (abs) and a relative tol.
		near := func(what string, got, want, abs, tol float64) {
			if math.Abs(got-want) > abs+tol*math.Abs(want) {
				t.Errorf("%s = %v, want %v from the line's own figures: %s", what, got, want, line)
			}
		}
		ops, elapsed := num("ops"), num("elapsed_ns")/1e9
		if ops < 1 || ops > 40 || elapsed <= 0 {
			t.Errorf("%v ops in %vs: %s", ops, elapsed, line)
		}
		near("ops_per_s", num("ops_per_s"), ops/elapsed, 0.0005, 1e-9)
		// cpu/op is whole nanoseconds: at least 1000 of them here.
		if num("ops_per_cpu_s") > 0 {
			near("cpu_per_op_ns", num("cpu_per_op_ns")*num("ops_per_cpu_s"), 1e9, 0, 1e-3)
		}
		if kv["op"] == "ping" {
			continue
		}
		near("p50_over_ping", num("p50_over_ping"), num("p50_ns")/num("ping_p50_ns"), 0.00005, 1e-9)
		if num("p99_ns") < num("p50_ns") {
			t.Errorf("p99 below p50: %s", line)
		}
	}
	if results != 20 {
		t.Errorf("%d RESULT lines, want 20 (2 modes x 2 caller counts x 5 operations):\n%s", results, out)
	}
	for _, mode := range []string{"in-process", "processes"} {
		for _, op := range []string{"ping", "put", "get-after-put", "get", "delete"} {
			for _, c := range []string{"x1", "x2"} {
				if rows[mode+" "+op+" "+c] != 1 {
					t.Errorf("no table row for %s %s %s:\n%s", mode, op, c, out)
				}
			}
		}
	}
	if !strings.Contains(string(out), "ray microbenchmark") {
		t.Errorf("no Ray figures:\n%s", out)
	}
}
