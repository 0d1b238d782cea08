package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

func TestNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	for _, c := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{ms(7), 50, 7 * time.Millisecond},
		{ms(7), 99, 7 * time.Millisecond},
		// 50 % of 4 is 2: the second value, not a mean of two.
		{ms(1, 2, 3, 4), 50, 2 * time.Millisecond},
		{ms(1, 2, 3, 4, 5), 50, 3 * time.Millisecond},
		// 99 % of 100 values is the 99th; of 10 values, the 10th.
		{ms(seq(100)...), 99, 99 * time.Millisecond},
		{ms(seq(10)...), 99, 10 * time.Millisecond},
		{ms(seq(200)...), 99, 198 * time.Millisecond},
	} {
		if got := nearestRank(c.sorted, c.p); got != c.want {
			t.Errorf("nearestRank(%d values, %v) = %v, want %v", len(c.sorted), c.p, got, c.want)
		}
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestOpsRowArithmetic(t *testing.T) {
	r := OpsRow{Ops: 500, Elapsed: 250 * time.Millisecond, CPU: 100 * time.Millisecond, P50: 60 * time.Microsecond, PingP50: 40 * time.Microsecond}
	if got := r.OpsPerSecond(); got != 2000 {
		t.Errorf("ops/s = %v, want 2000 (500 in 0.25 s)", got)
	}
	if got := r.OpsPerCPUSecond(); got != 5000 {
		t.Errorf("ops/cpu-s = %v, want 5000 (500 in 0.1 s of CPU)", got)
	}
	if got := r.CPUPerOp(); got != 200*time.Microsecond {
		t.Errorf("cpu/op = %v, want 200µs", got)
	}
	if got := r.P50OverPing(); got != 1.5 {
		t.Errorf("p50/ping = %v, want 1.5", got)
	}
	var zero OpsRow
	if zero.OpsPerSecond() != 0 || zero.OpsPerCPUSecond() != 0 || zero.CPUPerOp() != 0 || zero.P50OverPing() != 0 {
		t.Errorf("an empty row divides by zero: %v %v %v %v", zero.OpsPerSecond(), zero.OpsPerCPUSecond(), zero.CPUPerOp(), zero.P50OverPing())
	}
	lat := []time.Duration{5, 1, 4, 2, 3}
	summarizeOps(&r, lat)
	if r.P50 != 3 || r.P99 != 5 {
		t.Errorf("summarizeOps of 1..5 (unsorted): p50 %v p99 %v, want 3 and 5", r.P50, r.P99)
	}
}

// A tiny in-process run: every phase of every group runs, counts and
// latencies are filled in, the delete phase deletes no more than the
// put phase made, and the table and RESULT lines show every row.
func TestRunOpsInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rep, err := RunOps(ctx, OpsOptions{Modes: []string{OpsInProcess}, Sizes: []int64{1 << 10}, Callers: []int{1, 3},
		Phase: 20 * time.Millisecond, MaxOps: 50})
	if err != nil {
		t.Fatal(err)
	}
	ops := []string{OpPing, OpPut, OpGetAfterPut, OpGet, OpDelete}
	if len(rep.Rows) != 2*len(ops) {
		t.Fatalf("%d rows, want %d", len(rep.Rows), 2*len(ops))
	}
	for i, r := range rep.Rows {
		if want := ops[i%len(ops)]; r.Op != want {
			t.Errorf("row %d is %s, want %s", i, r.Op, want)
		}
		if r.Ops < 1 || r.Ops > 50 || r.Elapsed <= 0 || r.P50 <= 0 || r.P99 < r.P50 {
			t.Errorf("row %d (%s x%d): %d ops in %v, p50 %v p99 %v", i, r.Op, r.Callers, r.Ops, r.Elapsed, r.P50, r.P99)
		}
		if (r.Op == OpPing) != (r.PingP50 == 0) {
			t.Errorf("row %d (%s): ping p50 %v", i, r.Op, r.PingP50)
		}
	}
	for g := 0; g < 2; g++ {
		if put, del := rep.Rows[g*5+1], rep.Rows[g*5+4]; del.Ops > put.Ops {
			t.Errorf("group %d: %d deletes of %d puts", g, del.Ops, put.Ops)
		}
	}
	var out bytes.Buffer
	rep.WriteTable(&out)
	for _, want := range []string{"p50/ping", "single_client_get_calls_Plasma_Store", RaySource} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in the table:\n%s", want, out.String())
		}
	}
	rows := 0
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) == 11 && f[0] == OpsInProcess {
			rows++
		}
	}
	if rows != len(rep.Rows) {
		t.Errorf("%d rows of 11 columns in the table, want %d:\n%s", rows, len(rep.Rows), out.String())
	}
	if lines := rep.ResultLines(); len(lines) != len(rep.Rows) || !strings.HasPrefix(lines[3], "RESULT ops mode=in-process op=get size=1024 callers=1 ") {
		t.Errorf("RESULT lines: %q", lines)
	}
}

func TestOpsOptionsRefused(t *testing.T) {
	for _, o := range []OpsOptions{
		{Modes: []string{"elsewhere"}},
		{Modes: []string{OpsProcesses}}, // no binary
		{Sizes: []int64{0}},
		{Callers: []int{0}},
		{Phase: -time.Second},
	} {
		if _, err := RunOps(t.Context(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// OpsMarkdown puts one line per operation, size and callers, and per
// mode the median of the runs' p50 with their range, the median ratio to
// the ping and the median CPU per operation.
func TestOpsMarkdownTakesTheMedianOfTheRuns(t *testing.T) {
	run := func(p50 time.Duration) *OpsReport {
		return &OpsReport{Rows: []OpsRow{
			{Mode: OpsProcesses, Op: OpPing, Callers: 1, Ops: 10, Elapsed: time.Millisecond, CPU: time.Millisecond, P50: 10 * time.Microsecond},
			{Mode: OpsProcesses, Op: OpPut, Size: 1024, Callers: 1, Ops: 10, Elapsed: time.Millisecond, CPU: 2 * time.Millisecond,
				P50: p50, PingP50: 10 * time.Microsecond},
		}}
	}
	md := OpsMarkdown([]*OpsReport{run(10 * time.Microsecond), run(50 * time.Microsecond), run(30 * time.Microsecond)})
	for _, want := range []string{
		"| op | size | callers | processes: p50 (min–max), ×ping | cpu/op |",
		"| ping | - | 1 | 10.0 µs (10.0–10.0) | 100.0 µs |",
		"| put | 1KiB | 1 | 30.0 µs (10.0–50.0), 3.00× | 200.0 µs |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in\n%s", want, md)
		}
	}
}
