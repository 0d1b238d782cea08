//go:build linux

package processtest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestScaleConvergence starts N `hoplite node` processes on 127.0.0.1,
// every one given every seed, and reports how long until every member's
// view is exactly the N of them, then what the idle cluster costs: CPU
// seconds per member per second and bytes its processes read and wrote
// through system calls (health checks, gossip, the actor remote, logs)
// per member per second, over scaleIdle. It is a measurement, run only
// when HOPLITE_SCALE_MEMBERS names the sizes (for example "8,24,48");
// HOPLITE_SCALE_WAIT bounds each convergence (default 120s) and
// HOPLITE_SCALE_ARGS adds flags to every member (space separated).
// HOPLITE_SCALE_BINS compares builds side by side in one run
// ("before=/path/hoplite,after=/other/hoplite", each size for each in
// turn); without it the test builds this tree's.
//
//	HOPLITE_SCALE_MEMBERS=8,24,48 go test -run TestScaleConvergence -v -timeout 30m ./cluster/processtest/
func TestScaleConvergence(t *testing.T) {
	sizes := scaleSizes(t)
	if len(sizes) == 0 {
		t.Skip("a measurement: set HOPLITE_SCALE_MEMBERS, e.g. 8,24,48")
	}
	wait := 120 * time.Second
	if s := os.Getenv("HOPLITE_SCALE_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("HOPLITE_SCALE_WAIT: %v", err)
		}
		wait = d
	}
	extra := strings.Fields(os.Getenv("HOPLITE_SCALE_ARGS"))
	type build struct{ name, bin string }
	var builds []build
	for _, f := range strings.Split(os.Getenv("HOPLITE_SCALE_BINS"), ",") {
		if name, bin, ok := strings.Cut(strings.TrimSpace(f), "="); ok {
			builds = append(builds, build{name, bin})
		}
	}
	if len(builds) == 0 {
		builds = []build{{"tree", hopliteBinary(t)}}
	}
	for _, n := range sizes {
		for _, b := range builds {
			t.Run(fmt.Sprintf("%s/%d", b.name, n), func(t *testing.T) {
				r := measureScale(t, b.bin, n, wait, extra)
				t.Logf("%s N=%d converged=%v in %v; idle: %.4f CPU-s/s per member, %.0f B/s syscall I/O per member (%v window)",
					b.name, n, r.converged, r.convergence.Round(10*time.Millisecond), r.cpuPerMember, r.ioPerMember, scaleIdle)
				if !r.converged {
					t.Errorf("%s N=%d: views did not converge within %v: %s", b.name, n, wait, r.lag)
				}
			})
		}
	}
}

// scaleIdle is the idle window the cost is measured over.
const scaleIdle = 10 * time.Second

type scaleResult struct {
	converged    bool
	convergence  time.Duration // from the first process's start
	lag          string        // the views that differ, when not converged
	cpuPerMember float64       // CPU seconds per second
	ioPerMember  float64       // bytes per second, read plus written
}

func scaleSizes(t *testing.T) []int {
	var out []int
	for _, f := range strings.Split(os.Getenv("HOPLITE_SCALE_MEMBERS"), ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > 256 {
			t.Fatalf("HOPLITE_SCALE_MEMBERS: %q is not a size in 1..256", f)
		}
		out = append(out, n)
	}
	return out
}

// measureScale starts n members, waits up to wait for their views to
// agree, and measures them idle.
func measureScale(t *testing.T, bin string, n int, wait time.Duration, extra []string) scaleResult {
	slots, seeds := memberSlots(t, n)
	start := time.Now()
	nodes := make([]*nodeProc, n)
	for i := range nodes {
		nodes[i] = startNode(t, bin, slots[i], seeds, extra...)
	}
	for _, p := range nodes {
		p.waitStarted(t, wait)
	}
	want := make([]string, n)
	for i, p := range nodes {
		want[i] = p.id
	}
	slices.Sort(want)
	c := newTestClient(t)
	var r scaleResult
	end := start.Add(wait)
	for {
		var differ []string
		for _, p := range nodes {
			v, err := c.view(p)
			switch {
			case err != nil:
				differ = append(differ, fmt.Sprintf("%s: %v", p.id, err))
			case !slices.Equal(v, want):
				missing := slices.DeleteFunc(slices.Clone(want), func(id string) bool { return slices.Contains(v, id) })
				extra := slices.DeleteFunc(slices.Clone(v), func(id string) bool { return slices.Contains(want, id) })
				differ = append(differ, fmt.Sprintf("%s sees %d (missing %v, others %v)", p.id, len(v), missing, extra))
			}
		}
		if len(differ) == 0 {
			r.converged, r.convergence = true, time.Since(start)
			break
		}
		if time.Now().After(end) {
			r.lag = strings.Join(differ, "; ")
			return r
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Let the joins' aftermath (shard moves, the paced polls' back-off)
	// settle before the idle window.
	time.Sleep(5 * time.Second)
	cpu0, io0 := procTotals(t, nodes)
	t0 := time.Now()
	time.Sleep(scaleIdle)
	cpu1, io1 := procTotals(t, nodes)
	secs := time.Since(t0).Seconds()
	r.cpuPerMember = (cpu1 - cpu0) / secs / float64(n)
	r.ioPerMember = float64(io1-io0) / secs / float64(n)
	return r
}

// procTotals sums the processes' CPU seconds (user and system) and the
// bytes they read and wrote through system calls.
func procTotals(t *testing.T, nodes []*nodeProc) (cpu float64, io int64) {
	const ticks = 100 // USER_HZ on Linux
	for _, p := range nodes {
		pid := p.cmd.Process.Pid
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			t.Fatalf("member %s: %v", p.id, err)
		}
		// The fields after the command's closing parenthesis: utime and
		// stime are the 12th and 13th of them.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		cpu += (ut + st) / ticks
		ios, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
		if err != nil {
			t.Fatalf("member %s: %v", p.id, err)
		}
		for _, line := range strings.Split(string(ios), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			if k == "rchar" || k == "wchar" {
				b, _ := strconv.ParseInt(v, 10, 64)
				io += b
			}
		}
	}
	return cpu, io
}
