//go:build linux

package processtest

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/etcdtest"
)

// BenchmarkScaleConvergence starts N `hoplite node` processes on 127.0.0.1,
// every one given every seed, and reports how long until every member's
// view is exactly the N of them, then what the idle cluster costs: CPU
// seconds per member per second and bytes its processes read and wrote
// through system calls (health checks, gossip, the actor remote, logs)
// per member per second, over scaleIdle. Then it SIGSTOPs one member for
// 3 s (it must stay in every view, the same incarnation) and SIGKILLs
// another, reporting how long until no view lists it. It is a
// measurement, so a benchmark: HOPLITE_SCALE_MEMBERS names the sizes
// (default 8; for example "8,24,48"), HOPLITE_SCALE_WAIT bounds each convergence
// (default 120s), HOPLITE_SCALE_ARGS adds flags to every member (space
// separated) and HOPLITE_SCALE_REPS repeats each measurement (default 1;
// medians and ranges are logged at the end). HOPLITE_SCALE_HOLD keeps
// the converged cluster that long before the idle window (for example
// 10m), comparing every view with the members every 5 s: any member
// missing from a view then is a false expulsion; HOPLITE_SCALE_SETTLE
// how long after it the idle window begins (default 5s). The load average
// (/proc/loadavg) is logged with each measurement: the members share
// the machine with whatever else runs. HOPLITE_SCALE_PROVIDER=etcd
// runs the members on the etcd provider instead, against a real etcd
// started in the test process (internal/etcdtest), whose CPU over the
// idle window is reported beside the members'. HOPLITE_SCALE_BINS compares
// builds side by side in one run ("before=/path/hoplite,after=/other/
// hoplite", each size for each in turn); without it the test builds this
// tree's. HOPLITE_SCALE_TESTBED=RATE (root; e.g. 50mbit) runs every
// member in a network namespace of its own on the testbed (bench/testbed),
// behind a link of RATE up and down, at its share of the CPUs as the
// testbed benchmarks run theirs.
//
//	HOPLITE_SCALE_MEMBERS=8,24,48 go test -run '^$' -bench BenchmarkScaleConvergence -benchtime 1x -timeout 30m ./cluster/processtest/
func BenchmarkScaleConvergence(t *testing.B) {
	sizes := scaleSizes(t)
	if len(sizes) == 0 {
		sizes = []int{8}
	}
	wait := 120 * time.Second
	if s := os.Getenv("HOPLITE_SCALE_WAIT"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("HOPLITE_SCALE_WAIT: %v", err)
		}
		wait = d
	}
	reps := 1
	if s := os.Getenv("HOPLITE_SCALE_REPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 100 {
			t.Fatalf("HOPLITE_SCALE_REPS: %q is not in 1..100", s)
		}
		reps = n
	}
	extra := strings.Fields(os.Getenv("HOPLITE_SCALE_ARGS"))
	provider := os.Getenv("HOPLITE_SCALE_PROVIDER")
	if provider != "" && provider != "etcd" {
		t.Fatalf("HOPLITE_SCALE_PROVIDER: %q is not etcd (or empty: automanaged)", provider)
	}
	var hold time.Duration
	if s := os.Getenv("HOPLITE_SCALE_HOLD"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			t.Fatalf("HOPLITE_SCALE_HOLD: %q is not a duration of 0 or more", s)
		}
		hold = d
	}
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
	var bed *scaleBed
	if bw := os.Getenv("HOPLITE_SCALE_TESTBED"); bw != "" {
		if provider != "" {
			t.Fatal("HOPLITE_SCALE_TESTBED runs the automanaged provider only")
		}
		bed = startScaleBed(t, slices.Max(sizes), bw)
		for i := range builds {
			builds[i].name += "-testbed-" + bw
		}
	}
	if provider != "" {
		for i := range builds {
			builds[i].name += "-" + provider
		}
	}
	results := map[string][]scaleResult{}
	var keys []string
	for rep := range reps {
		for _, n := range sizes {
			for _, b := range builds {
				key := fmt.Sprintf("%s/%d", b.name, n)
				if rep == 0 {
					keys = append(keys, key)
				}
				t.Run(fmt.Sprintf("%s/%d", key, rep), func(t *testing.B) {
					r := measureScale(t, bed, b.bin, n, wait, hold, provider, extra)
					results[key] = append(results[key], r)
					t.Logf("%s N=%d converged=%v in %v; held %v with %d false expulsions (%d checks); idle: %.4f CPU-s/s per member, %.0f B/s syscall I/O per member (%v window; loadavg %s); "+
						"paused member kept %v; killed member out of every view in %v; etcd %.4f CPU-s/s; %.0f B/s sent per member on its link (testbed)",
						b.name, n, r.converged, r.convergence.Round(10*time.Millisecond), hold, r.expelled, r.holdChecks, r.cpuPerMember, r.ioPerMember, scaleIdle, r.load,
						r.pauseKept, r.killGone.Round(time.Millisecond), r.etcdCPU, r.netPerMember)
					if !r.converged {
						t.Errorf("%s N=%d: views did not converge within %v: %s", b.name, n, wait, r.lag)
					} else if r.expelled > 0 {
						t.Errorf("%s N=%d: %d views lacked a running member while held: %s", b.name, n, r.expelled, r.lag)
					} else if !r.pauseKept {
						t.Errorf("%s N=%d: a member SIGSTOPped for %v was expelled: %s", b.name, n, scalePause, r.lag)
					}
				})
			}
		}
	}
	for _, key := range keys {
		rs := results[key]
		var conv, cpu, io, link, gone []float64
		failed := 0
		for _, r := range rs {
			if !r.converged {
				failed++
				continue
			}
			conv = append(conv, r.convergence.Seconds())
			cpu = append(cpu, r.cpuPerMember)
			io = append(io, r.ioPerMember)
			gone = append(gone, r.killGone.Seconds())
			if bed != nil {
				link = append(link, r.netPerMember)
			}
		}
		t.Logf("%s: %d of %d converged; convergence s %s; idle CPU-s/s per member %s; syscall I/O B/s per member %s; link B/s sent per member %s; kill known to all s %s",
			key, len(rs)-failed, len(rs), medianRange(conv, "%.2f"), medianRange(cpu, "%.4f"), medianRange(io, "%.0f"), medianRange(link, "%.0f"), medianRange(gone, "%.2f"))
	}
}

// medianRange formats the median of xs and its range.
func medianRange(xs []float64, format string) string {
	if len(xs) == 0 {
		return "-"
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	med := xs[len(xs)/2]
	if len(xs)%2 == 0 {
		med = (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	return fmt.Sprintf(format+" ["+format+".."+format+"]", med, xs[0], xs[len(xs)-1])
}

// scalePause is how long a member is SIGSTOPped: it must not be expelled.
const scalePause = 3 * time.Second

// scaleIdle is the idle window the cost is measured over.
const scaleIdle = 10 * time.Second

// scaleSettle is how long after the convergence the idle window begins:
// HOPLITE_SCALE_SETTLE, 5 s by default.
func scaleSettle(t testing.TB) time.Duration {
	s := os.Getenv("HOPLITE_SCALE_SETTLE")
	if s == "" {
		return 5 * time.Second
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		t.Fatalf("HOPLITE_SCALE_SETTLE: %q is not a duration of 0 or more", s)
	}
	return d
}

type scaleResult struct {
	converged    bool
	convergence  time.Duration // from the first process's start
	lag          string        // the views that differ, when not converged
	cpuPerMember float64       // CPU seconds per second
	ioPerMember  float64       // bytes per second, read plus written
	pauseKept    bool          // the member paused for scalePause stayed in every view
	killGone     time.Duration // from a SIGKILL until no view lists the member
	expelled     int           // views that lacked a running member while held
	holdChecks   int           // rounds of view comparisons while held
	load         string        // /proc/loadavg's 1, 5 and 15 minute averages at the idle window
	etcdCPU      float64       // the test process's CPU seconds per second over the idle window (its etcd's, with the etcd provider)
	netPerMember float64       // on the testbed: bytes per second a member sent on its link over the idle window
}

func scaleSizes(t testing.TB) []int {
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
func measureScale(t testing.TB, bed *scaleBed, bin string, n int, wait, hold time.Duration, provider string, extra []string) scaleResult {
	var slots []memberSlot
	var seeds []string
	c := (*testClient)(nil)
	if bed != nil {
		slots, seeds = bed.slots(n)
		// Plaintext on 198.18.x.x: those addresses exist only in this
		// machine's namespaces and on its bridge.
		extra = append([]string{"-insecure"}, extra...)
		c = bed.client
	} else {
		slots, seeds = memberSlots(t, n)
		c = newTestClient(t)
	}
	if provider == "etcd" {
		srv := etcdtest.Start(t)
		seeds, extra = nil, append([]string{"-provider", "etcd", "-provider-address", srv.Endpoint()}, extra...)
	}
	start := time.Now()
	nodes := make([]*nodeProc, n)
	for i := range nodes {
		var wrap []string
		if bed != nil {
			wrap = bed.wrap(i, n)
		}
		nodes[i] = startNodeIn(t, wrap, bin, slots[i], seeds, extra...)
	}
	for _, p := range nodes {
		p.waitStarted(t, wait)
	}
	want := make([]string, n)
	for i, p := range nodes {
		want[i] = p.id
	}
	slices.Sort(want)
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
	for end := time.Now().Add(hold); time.Now().Before(end); {
		time.Sleep(5 * time.Second)
		r.holdChecks++
		for _, p := range nodes {
			v, err := c.view(p)
			if err != nil {
				continue // a slow answer is no expulsion
			}
			if missing := slices.DeleteFunc(slices.Clone(want), func(id string) bool { return slices.Contains(v, id) }); len(missing) > 0 {
				r.expelled++
				r.lag = fmt.Sprintf("%s lacks %v after %v", p.id, missing, time.Since(start).Round(time.Second))
			}
		}
	}
	// Let the joins' aftermath (shard moves, the paced polls' back-off,
	// the comparisons of views at their quiet interval) settle before
	// the idle window.
	time.Sleep(scaleSettle(t))
	cpu0, io0 := procTotals(t, nodes)
	self0 := procCPU(t, os.Getpid())
	var net0 int64
	if bed != nil {
		net0 = bed.sent(t, n)
	}
	t0 := time.Now()
	time.Sleep(scaleIdle)
	cpu1, io1 := procTotals(t, nodes)
	secs := time.Since(t0).Seconds()
	if bed != nil {
		r.netPerMember = float64(bed.sent(t, n)-net0) / secs / float64(n)
	}
	if provider == "etcd" {
		r.etcdCPU = (procCPU(t, os.Getpid()) - self0) / secs
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			r.load = strings.Join(f[:3], " ")
		}
	}
	r.cpuPerMember = (cpu1 - cpu0) / secs / float64(n)
	r.ioPerMember = float64(io1-io0) / secs / float64(n)
	if n < 3 {
		r.pauseKept = true
		return r
	}

	paused := nodes[0]
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scalePause)
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Long enough for the misses of the pause to have their effect.
	time.Sleep(10 * time.Second)
	r.pauseKept = true
	for _, p := range nodes {
		v, err := c.view(p)
		if err != nil || !slices.Equal(v, want) {
			r.pauseKept = false
			r.lag = fmt.Sprintf("%s sees %v (err %v)", p.id, len(v), err)
			break
		}
	}

	victim := nodes[n/2]
	rest := without(nodes, victim)
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	r.killGone = -1 // never
	for end := killed.Add(wait); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		gone := true
		for _, p := range rest {
			v, err := c.view(p)
			if err != nil || slices.Contains(v, victim.id) {
				gone = false
				break
			}
		}
		if gone {
			r.killGone = time.Since(killed)
			break
		}
	}
	return r
}

// procCPU is process pid's CPU seconds (user and system).
func procCPU(t testing.TB, pid int) float64 {
	const ticks = 100 // USER_HZ on Linux
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatalf("process %d: %v", pid, err)
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / ticks
}

// procTotals sums the processes' CPU seconds (user and system) and the
// bytes they read and wrote through system calls.
func procTotals(t testing.TB, nodes []*nodeProc) (cpu float64, io int64) {
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
