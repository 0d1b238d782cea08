package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// eventLog is one file every step of a run appends a line to, as it
// runs: the fake backend's measurements and the stand-in peer scripts'
// launches alike, so its lines are the run's order.
type eventLog struct {
	path string
	mu   sync.Mutex
}

func (l *eventLog) add(line string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := os.OpenFile(l.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	return err
}

// lines are the log's lines, each a step: "ours rep=0" (rep -1: a
// warm-up) or "mpi alg=4 reps=1" (a peer launch).
func (l *eventLog) lines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(l.path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// tagRep is the repetition a measurement's object ids carry (its tag:
// scenario-size-system-r<rep>-<nanos>); -1 for a warm-up.
var tagRep = regexp.MustCompile(`-r(-?\d+)-\d+-`)

func repOf(t *testing.T, id string) int {
	m := tagRep.FindStringSubmatch(id)
	if m == nil {
		t.Errorf("id %q carries no repetition", id)
		return -99
	}
	rep, _ := strconv.Atoi(m[1])
	return rep
}

// orderTimes are the fake reduce's times per system and measured
// repetition; a warm-up takes fakeWarmup, which would move every median
// it got into.
var orderTimes = map[string][]time.Duration{
	SysOurs:        {300 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond},
	SysReduceBcast: {700 * time.Millisecond, 900 * time.Millisecond, 800 * time.Millisecond},
	SysNaive:       {1500 * time.Millisecond, 1600 * time.Millisecond, 1400 * time.Millisecond},
}

// orderBackend is an instant cluster whose (All)Reduce takes the time of
// orderTimes for the repetition its target's id names, and logs it.
type orderBackend struct {
	t   *testing.T
	sys system
	log *eventLog
}

func (b *orderBackend) Prepare(context.Context, int, DataSpec) error { return nil }
func (b *orderBackend) Put(_ context.Context, _ int, _ string, at time.Time) (time.Time, error) {
	return at, nil
}

// Fetch: the naive AllReduce's Gets of the result, untimed here (a zero
// timing is left out of the span).
func (b *orderBackend) Fetch(context.Context, int, string, time.Time) (timing, error) {
	return timing{}, nil
}

func (b *orderBackend) Reduce(_ context.Context, _ int, target string, sources []string, num int, _ bool, at time.Time) (*messages.ReduceReply, timing, error) {
	rep := repOf(b.t, target)
	d := fakeWarmup
	if rep >= 0 {
		d = orderTimes[b.sys.name][rep]
	}
	if err := b.log.add(fmt.Sprintf("%s rep=%d", b.sys.name, rep)); err != nil {
		return nil, timing{}, err
	}
	return &messages.ReduceReply{ReducedIds: sources[:num], Plan: &messages.ReducePlan{Degree: 1, Shape: reduction.ShapeDAry}},
		timing{start: at, done: at.Add(d)}, nil
}

func (b *orderBackend) Verify(context.Context, int, string, []DataSpec) error { return nil }
func (b *orderBackend) Delete(context.Context, []string)                      {}
func (b *orderBackend) RoundTrips(context.Context, int, []int, time.Time, bool) (timing, error) {
	return timing{}, fmt.Errorf("no")
}
func (b *orderBackend) CPU(context.Context) (time.Duration, error) { return 0, nil }
func (b *orderBackend) Kill(int) error                             { return nil }
func (b *orderBackend) TargetID(_ context.Context, prefix string) (string, error) {
	return prefix + "-0", nil
}
func (b *orderBackend) Close() {}

// peerScript writes a stand-in peer script: it logs "PEER alg=A reps=R"
// and prints a RESULT line whose median is BASE.k, k counting the
// launches of that algorithm before it (so each launch's time is known),
// BASE being defaultBase for --algorithm default and pinnedBase for any
// other; --algorithm best names best as the winner. With failOn > 0 its
// failOn-th launch of the default algorithm exits 1; failOn < 0: every
// launch does.
func peerScript(t *testing.T, dir, peer string, log *eventLog, defaultName, best string, defaultBase, pinnedBase, failOn int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, peer), 0o755); err != nil {
		t.Fatal(err)
	}
	script := `#!/bin/bash
set -u
log=` + log.path + `
op= size= reps= alg=none
while [ $# -gt 0 ]; do
	case "$1" in
	--op) op=$2 ;; --size) size=$2 ;; --reps) reps=$2 ;; --algorithm) alg=$2 ;; --interval-ms | --start-lead-ms) ;;
	*) echo "unknown flag $1" >&2; exit 2 ;;
	esac
	shift 2
done
k=$(grep -c "^` + peer + ` alg=$alg " "$log" || true)
echo "` + peer + ` alg=$alg reps=$reps" >>"$log"
if [ "$alg" = default ] && { [ ` + strconv.Itoa(failOn) + ` -lt 0 ] || [ $((k + 1)) -eq ` + strconv.Itoa(failOn) + ` ]; }; then
	echo "` + peer + `: failing on purpose" >&2
	exit 1
fi
case "$alg" in
best) name=` + best + ` base=` + strconv.Itoa(pinnedBase) + ` ;;
default) name=` + defaultName + ` base=` + strconv.Itoa(defaultBase) + ` ;;
*) name=$alg base=` + strconv.Itoa(pinnedBase) + ` ;;
esac
echo "RESULT peer=` + peer + ` op=$op nodes=3 size=$size algorithm=$name median=$base.$k min=$base.$k max=$base.$k reps=$reps cpu_s=0.$((k + 1)) timing=scheduled"
`
	if err := os.WriteFile(filepath.Join(dir, peer, "run"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// orderRun runs allreduce with ours, reduce-bcast and naive on the fake
// backend and MPI and Gloo as stand-in scripts (each failing as failOn
// says, see peerScript), 3 reps after 1 warm-up.
func orderRun(t *testing.T, sequential bool, mpiFailOn, glooFailOn int) (*Report, *eventLog) {
	t.Helper()
	testutil.NeedFile(t, "/bin/bash", "the stand-in peer scripts run in bash")
	dir := t.TempDir()
	log := &eventLog{path: filepath.Join(dir, "events")}
	peers := filepath.Join(dir, "peers")
	peerScript(t, peers, "mpi", log, "default", "4", 1, 2, mpiFailOn)
	peerScript(t, peers, "gloo", log, "ring", "ring_chunked", 3, 4, glooFailOn)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r, err := Run(ctx, Options{Scenario: "allreduce", Nodes: 3, Sizes: []int64{1 << 20}, Reps: 3, Warmup: 1,
		Peers: []string{"naive", "mpi", "gloo"}, OpTimeout: 10 * time.Second, Progress: io.Discard, Sequential: sequential,
		Testbed: &Testbed{PeersDir: peers, LogDir: dir,
			Hosts:      []string{"198.18.77.1", "198.18.77.2", "198.18.77.3"},
			Namespaces: []string{"x-h0", "x-h1", "x-h2"}},
		newBackend: func(o *Options, s system, _ *logrus.Logger) (backend, error) {
			return &orderBackend{t: t, sys: s, log: log}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	return r, log
}

// steps names each line of the log: the system it ran ("mpi alg=4" is
// mpi-best's pinned launch) and what it was.
func steps(lines []string) []string {
	var out []string
	for _, l := range lines {
		f := strings.Fields(l)
		switch {
		case strings.HasPrefix(f[1], "rep=-"):
			out = append(out, f[0]+" warm-up")
		case strings.HasPrefix(f[1], "rep="):
			out = append(out, f[0])
		case f[1] == "alg=default":
			out = append(out, f[0]+"-default "+f[2])
		case f[1] == "alg=best":
			out = append(out, f[0]+"-best sweep "+f[2])
		default:
			out = append(out, f[0]+"-best "+f[2])
		}
	}
	return out
}

func result(t *testing.T, r *Report, system string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.System == system {
			return res
		}
	}
	t.Fatalf("no result for %s", system)
	return Result{}
}

func secondsOf(ds []time.Duration) []float64 {
	var out []float64
	for _, d := range ds {
		out = append(out, d.Seconds())
	}
	return out
}

func nearly(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-9 {
			return false
		}
	}
	return true
}

// By default a comparison's repetitions interleave across its systems:
// the best peers' sweeps and every warm-up first, then round k runs rep
// k of every system, rotated by one each round, each of ours's right
// after a warm-up of its own; a peer is launched once
// per rep (--reps 1), its best column with the algorithm the sweep chose.
// Each result keeps its own times (no warm-up, no other system's), and
// order[] places every one of them in the run.
func TestInterleavedRunOrder(t *testing.T) {
	r, log := orderRun(t, false, 0, 0)
	lines := log.lines(t)
	got := steps(lines)
	round := []string{SysOurs, SysReduceBcast, SysNaive, "mpi-default reps=1", "mpi-best reps=1", "gloo-default reps=1", "gloo-best reps=1"}
	want := []string{"mpi-best sweep reps=3", "gloo-best sweep reps=3", SysOurs + " warm-up", SysReduceBcast + " warm-up", SysNaive + " warm-up"}
	for k := range 3 {
		for _, step := range append(slices.Clone(round[k:]), round[:k]...) {
			if !strings.Contains(step, "reps=") {
				// ours's systems time each rep right after a warm-up
				// of its own, as a peer's launch does.
				want = append(want, step+" warm-up")
			}
			want = append(want, step)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("the run's steps\n%q\nwant\n%q", got, want)
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "mpi alg=") && !strings.HasPrefix(l, "mpi alg=default") && !strings.HasPrefix(l, "mpi alg=best") && l != "mpi alg=4 reps=1" {
			t.Errorf("mpi-best ran %q, want the sweep's algorithm 4 forced", l)
		}
		if strings.HasPrefix(l, "gloo alg=ring") && l != "gloo alg=ring_chunked reps=1" {
			t.Errorf("gloo-best ran %q, want the sweep's ring_chunked forced", l)
		}
	}
	if r.RunOrder != OrderInterleaved || len(r.Notes) == 0 || !strings.HasPrefix(r.Notes[0], "run order: interleaved: ") ||
		!strings.Contains(r.Notes[0], "a peer is launched once per measured rep") {
		t.Errorf("run order %q, notes %q", r.RunOrder, r.Notes)
	}
	for _, want := range []string{"allreduce 1MiB mpi-best: fastest algorithm 4 (an unrecorded sweep, 3 reps each: median 2.000s)",
		"allreduce 1MiB gloo-best: fastest algorithm ring_chunked (an unrecorded sweep, 3 reps each: median 4.000s)"} {
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
			t.Errorf("notes %q lack %q", r.Notes, want)
		}
	}

	// Each launch's time, in the order of its launches (the script's
	// BASE.k); ours's from the fake, by rep.
	wantTimes := map[string][]float64{
		SysOurs: secondsOf(orderTimes[SysOurs]), SysReduceBcast: secondsOf(orderTimes[SysReduceBcast]), SysNaive: secondsOf(orderTimes[SysNaive]),
		// The forced launches count from 0: the sweep ran "best".
		SysMPIDefault: {1.0, 1.1, 1.2}, SysMPIBest: {2.0, 2.1, 2.2}, SysGlooDefault: {3.0, 3.1, 3.2}, SysGlooBest: {4.0, 4.1, 4.2},
	}
	wantMedian := map[string]float64{SysOurs: 0.2, SysReduceBcast: 0.8, SysNaive: 1.5, SysMPIDefault: 1.1, SysMPIBest: 2.1, SysGlooDefault: 3.1, SysGlooBest: 4.1}
	for name, times := range wantTimes {
		res := result(t, r, name)
		if !res.ok() || !nearly(res.Times, times) || res.Reps != 3 || math.Abs(res.Median-wantMedian[name]) > 1e-9 {
			t.Errorf("%s: %s %q, times %v median %v reps %d; want %v, median %v", name, res.Status, res.Reason, res.Times, res.Median,
				res.Reps, times, wantMedian[name])
		}
		if len(res.Order) != len(res.Times) {
			t.Errorf("%s: order %v for %d times", name, res.Order, len(res.Times))
			continue
		}
		for i, o := range res.Order {
			if o.Rep != i+1 || o.Seq < 1 || o.Seq > len(got) || !strings.HasPrefix(got[o.Seq-1]+" ", name+" ") {
				t.Errorf("%s: times[%d] placed at %+v, but that step ran %q", name, i, o, got[max(0, min(o.Seq, len(got))-1)])
			}
		}
		// Peers: the median CPU a launch reported (cpu_s 0.1, 0.2, 0.3).
		if strings.HasPrefix(name, "mpi") || strings.HasPrefix(name, "gloo") {
			if !nearly(res.CPU, []float64{0.1, 0.2, 0.3}) || math.Abs(res.CPUMedian-0.2) > 1e-9 {
				t.Errorf("%s: cpu %v median %v", name, res.CPU, res.CPUMedian)
			}
		}
	}
	if a := result(t, r, SysMPIBest).Extra["algorithm"]; a != 4 {
		t.Errorf("mpi-best: algorithm %v, want 4", a)
	}
	// The ratios are still medians over ours's.
	if res := result(t, r, SysGlooDefault); math.Abs(res.Ratio-3.1/0.2) > 1e-9 {
		t.Errorf("gloo-default: ratio %v, want %v", res.Ratio, 3.1/0.2)
	}
	// Every launch keeps its own log, named by its comparison and step.
	for name, args := range map[string]string{"peer-mpi-best-allreduce-1MiB-sweep.log": "--reps 3 --algorithm best --start-lead-ms 20",
		"peer-mpi-best-allreduce-1MiB-rep3.log": "--reps 1 --algorithm 4 --start-lead-ms 20", "peer-gloo-default-allreduce-1MiB-rep1.log": "--reps 1 --algorithm default --start-lead-ms 20"} {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(log.path), name))
		if err != nil || !strings.Contains(string(b), args+"\n") {
			t.Errorf("%s: %q, %v; want the launch with %s", name, b, err, args)
		}
	}
	// order[] reads back from the JSON.
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.RunOrder != OrderInterleaved || !slices.Equal(result(t, back, SysMPIBest).Order, result(t, r, SysMPIBest).Order) {
		t.Errorf("read back: run order %q, mpi-best order %v", back.RunOrder, result(t, back, SysMPIBest).Order)
	}
}

// --sequential keeps the order from before: each system's warm-up and
// reps back to back, then each peer in one launch of --reps (the best
// ones sweeping every algorithm), whose summary is the result.
func TestSequentialRunOrder(t *testing.T) {
	r, log := orderRun(t, true, 0, 0)
	got := steps(log.lines(t))
	want := []string{SysOurs + " warm-up", SysOurs, SysOurs, SysOurs, SysReduceBcast + " warm-up", SysReduceBcast, SysReduceBcast, SysReduceBcast,
		SysNaive + " warm-up", SysNaive, SysNaive, SysNaive, "mpi-default reps=3", "mpi-best sweep reps=3", "gloo-default reps=3", "gloo-best sweep reps=3"}
	if !slices.Equal(got, want) {
		t.Errorf("the run's steps\n%q\nwant\n%q", got, want)
	}
	if r.RunOrder != OrderSequential || !strings.HasPrefix(r.Notes[0], "run order: sequential: ") {
		t.Errorf("run order %q, notes %q", r.RunOrder, r.Notes)
	}
	if res := result(t, r, SysOurs); !nearly(res.Times, secondsOf(orderTimes[SysOurs])) ||
		!slices.Equal(res.Order, []RepOrder{{1, 2}, {2, 3}, {3, 4}}) {
		t.Errorf("ours: times %v order %v", res.Times, res.Order)
	}
	if res := result(t, r, SysMPIBest); !res.ok() || res.Median != 2.0 || res.Reps != 3 || len(res.Times) != 0 || res.Extra["algorithm"] != 4 {
		t.Errorf("mpi-best: %+v", res)
	}
}

// A peer whose first launch fails is not launched again (a script that
// cannot run here would fail every round, a timeout each time); one that
// fails later loses that rep only and keeps the others, failed, as ours
// does. A best sweep that fails leaves nothing to force: no launch.
func TestInterleavedPeerFailures(t *testing.T) {
	r, log := orderRun(t, false, -1, 2)
	var mpi, gloo []string
	for _, l := range log.lines(t) {
		if strings.HasPrefix(l, "mpi alg=default") {
			mpi = append(mpi, l)
		}
		if strings.HasPrefix(l, "gloo alg=default") {
			gloo = append(gloo, l)
		}
	}
	if len(mpi) != 1 {
		t.Errorf("mpi-default launched %q, want once", mpi)
	}
	// Only the default algorithm fails: mpi-best runs all its reps.
	if res := result(t, r, SysMPIBest); !res.ok() || res.Reps != 3 {
		t.Errorf("mpi-best: %s %q reps %d", res.Status, res.Reason, res.Reps)
	}
	if res := result(t, r, SysMPIDefault); res.Status != StatusFailed || !strings.Contains(res.Reason, "failing on purpose") || res.Reps != 0 {
		t.Errorf("mpi-default: %s %q reps %d", res.Status, res.Reason, res.Reps)
	}
	if len(gloo) != 3 {
		t.Errorf("gloo-default launched %d times, want 3: %q", len(gloo), gloo)
	}
	res := result(t, r, SysGlooDefault)
	if res.Status != StatusFailed || !strings.HasPrefix(res.Reason, "1 of 3 reps failed, first: ") || res.Extra["failed_reps"] != 1 ||
		!nearly(res.Times, []float64{3.0, 3.2}) || len(res.Order) != 2 || res.Order[0].Rep != 1 || res.Order[1].Rep != 3 {
		t.Errorf("gloo-default: %s %q, times %v order %v extra %v", res.Status, res.Reason, res.Times, res.Order, res.Extra)
	}
	if res := result(t, r, SysGlooBest); !res.ok() || res.Reps != 3 {
		t.Errorf("gloo-best: %s %q reps %d", res.Status, res.Reason, res.Reps)
	}

	// A sweep that fails: the mpi script fails every launch of every
	// algorithm here.
	dir := t.TempDir()
	elog := &eventLog{path: filepath.Join(dir, "events")}
	if err := os.MkdirAll(filepath.Join(dir, "mpi"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mpi", "run"), []byte("#!/bin/sh\necho \"mpi $*\" >>"+elog.path+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	r2, err := Run(ctx, Options{Scenario: "reduce", Nodes: 3, Sizes: []int64{1 << 20}, Reps: 3, Warmup: 0,
		Peers: []string{"mpi"}, OpTimeout: 10 * time.Second, Progress: io.Discard,
		Testbed: &Testbed{PeersDir: dir, LogDir: dir, Hosts: []string{"a", "b", "c"}, Namespaces: []string{"x", "y", "z"}},
		newBackend: func(o *Options, s system, _ *logrus.Logger) (backend, error) {
			return &orderBackend{t: t, sys: s, log: elog}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	var launches []string
	for _, l := range elog.lines(t) {
		if strings.HasPrefix(l, "mpi ") {
			launches = append(launches, strings.Join(strings.Fields(l)[5:], " "))
		}
	}
	// The sweep (once), and mpi-default's first launch (once).
	if !slices.Equal(launches, []string{"--reps 3 --algorithm best --start-lead-ms 20", "--reps 1 --algorithm default --start-lead-ms 20"}) {
		t.Errorf("mpi launches %q", launches)
	}
	if res := result(t, r2, SysMPIBest); res.Status != StatusFailed || !strings.HasPrefix(res.Reason, "choosing the best algorithm: ") {
		t.Errorf("mpi-best: %s %q", res.Status, res.Reason)
	}
}

// An interleaved testbed run keeps every node set of ours's systems up at
// once: a run whose sets may not fit in memory runs sequentially.
func TestMemoryFallback(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct {
		sets  int
		size  int64
		avail int64
		want  string
	}{
		{2, 256 << 20, 20 * gib, "2 node sets of 8 up at once, about 24.0 GiB"}, // allreduce 256 MiB: ours and reduce-bcast
		{2, 256 << 20, 30 * gib, ""},
		{6, 32 << 20, 20 * gib, ""},
		{1, 1 << 30, gib, ""}, // one set: the sequential order holds it too
		{6, 256 << 20, 0, ""}, // unknown: no guess
	} {
		got := memoryFallback(c.sets, 8, c.size, c.avail)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) || (got != "" && !strings.Contains(got, "ran sequentially")) {
			t.Errorf("%d sets of %d bytes in %d: %q, want %q", c.sets, c.size, c.avail, got, c.want)
		}
	}
	if a := memAvailable(); runtime.GOOS == "linux" && a <= 0 {
		t.Errorf("MemAvailable %d on this Linux machine", a)
	}
}
