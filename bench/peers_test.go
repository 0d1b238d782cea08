package bench

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestPeerOp(t *testing.T) {
	for _, c := range []struct {
		peer     string
		g        group
		op, skip string // skip: a prefix of the reason, when there is no op
	}{
		{"gloo", group{scenario: "allreduce", kind: "allreduce"}, "allreduce", ""},
		{"mpi", group{scenario: "allreduce", kind: "allreduce"}, "allreduce", ""},
		{"dask", group{scenario: "allreduce", kind: "allreduce"}, "", "n/a: the dask peer has no allreduce"},
		{"gloo", group{scenario: "broadcast", kind: "broadcast"}, "bcast", ""},
		{"gloo", group{scenario: "reduce", kind: "reduce"}, "reduce", ""},
		{"gloo", group{scenario: "gather", kind: "gather"}, "gather", ""},
		{"gloo", group{scenario: "p2p", kind: "p2p"}, "p2p", ""},
		{"gloo", group{scenario: "async", kind: "async", hasInt: true}, "reduce", ""},
		{"gloo", group{scenario: "degree", kind: "reduce"}, "", "n/a: the peer has no degree"},
		{"gloo", group{scenario: "failure-reduce", kind: "reduce"}, "", "n/a: the peer has no failure-reduce"},
	} {
		op, why := peerOp(c.peer, c.g)
		if op != c.op || !strings.HasPrefix(why, c.skip) || (c.skip == "") != (why == "") {
			t.Errorf("peerOp(%s, %s) = %q, %q; want %q, %q", c.peer, c.g.scenario, op, why, c.op, c.skip)
		}
	}
}

// --peers gloo adds two columns, like mpi: Gloo's default algorithm and
// the best of all its algorithms for the op (after ours and, for an
// allreduce, ours reduced then broadcast).
func TestGlooSystems(t *testing.T) {
	o := &Options{Scenario: "allreduce", Nodes: 3, Peers: []string{"mpi", "gloo"}}
	var got []string
	for _, s := range o.systems() {
		got = append(got, s.name+"/"+s.peer+"/"+s.alg)
	}
	want := []string{SysOurs + "//", SysReduceBcast + "//", "mpi-default/mpi/default", "mpi-best/mpi/best", "gloo-default/gloo/default", "gloo-best/gloo/best"}
	if !slices.Equal(got, want) {
		t.Errorf("systems %v, want %v", got, want)
	}
}

// The driver's side of the peer contract, with a stand-in script: the
// flags and environment it gets, its RESULT line recorded, and a named
// best algorithm (Gloo's) kept in the report's notes.
func TestRunPeerNamedAlgorithm(t *testing.T) {
	peers := t.TempDir()
	if err := os.Mkdir(filepath.Join(peers, "gloo"), 0o755); err != nil {
		t.Fatal(err)
	}
	argsFile := filepath.Join(t.TempDir(), "args")
	script := `#!/bin/sh
echo "$* hosts=$HOPLITE_TESTBED_HOSTS ns=$HOPLITE_TESTBED_NS" >` + argsFile + `
echo "gloo: algorithm ring: RESULT peer=gloo op=allreduce nodes=3 size=1048576 algorithm=ring median=0.5 min=0.4 max=0.6 reps=1" >&2
echo "RESULT peer=gloo op=allreduce nodes=3 size=1048576 algorithm=ring_chunked interval_ms=0 median=0.25 min=0.125 max=0.375 reps=1"
`
	if err := os.WriteFile(filepath.Join(peers, "gloo", "run"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	o := &Options{Scenario: "allreduce", Nodes: 3, Sizes: []int64{1 << 20}, Bandwidth: Bandwidth{BitsPerSecond: 400e6}, Reps: 1,
		Peers: []string{"gloo"}, Testbed: &Testbed{PeersDir: peers,
			Hosts:      []string{"198.18.77.1", "198.18.77.2", "198.18.77.3", "198.18.77.4"},
			Namespaces: []string{"x-h0", "x-h1", "x-h2", "x-h3"}}}
	r := &runner{o: o, groups: o.groups(), systems: o.systems(), prog: newProgress(io.Discard, false, 2),
		tb: &testbedRun{logDir: t.TempDir()}}
	r.res = [][]Result{make([]Result, len(r.systems))}
	for si := range r.systems {
		r.res[0][si].Status = StatusOK
	}
	si := slices.IndexFunc(r.systems, func(s system) bool { return s.name == SysGlooBest })
	if si < 0 {
		t.Fatalf("no %s in %+v", SysGlooBest, r.systems)
	}
	r.runPeer(t.Context(), si)

	res := r.res[0][si]
	if res.Status != StatusOK || res.Median != 0.25 || res.Min != 0.125 || res.Max != 0.375 || res.Reps != 1 {
		t.Errorf("result %+v", res)
	}
	if _, ok := res.Extra["algorithm"]; ok {
		t.Errorf("a named algorithm became a number: %v", res.Extra)
	}
	if want := "allreduce 1MiB gloo-best: fastest algorithm ring_chunked"; !slices.Contains(r.notes, want) {
		t.Errorf("notes %q, want %q", r.notes, want)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	if want := "--op allreduce --size 1048576 --reps 1 --algorithm best --start-lead-ms 20 hosts=198.18.77.1,198.18.77.2,198.18.77.3 ns=x-h0,x-h1,x-h2\n"; string(args) != want {
		t.Errorf("the script got %q, want %q", args, want)
	}
}

// The MPI and Gloo peers are timed like ours: their script is asked to
// start its ranks as far ahead as ours's members start, and what its
// RESULT line says of its timing goes into the result: the method, and
// in every repetition the slowest rank from its own start and the
// ranks' start skew (the old method's figure beside the new one). A
// script whose line does not say (one from before) is recorded as timed
// from barrier exits.
func TestPeerRepRecordsTheTiming(t *testing.T) {
	peers := t.TempDir()
	for _, p := range []string{"mpi", "gloo"} {
		if err := os.Mkdir(filepath.Join(peers, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	argsFile := filepath.Join(t.TempDir(), "args")
	// The stand-in for MPI answers with its repetition's own= and skew=
	// from a file of lines, one per launch.
	lines := filepath.Join(t.TempDir(), "lines")
	if err := os.WriteFile(lines, []byte("0.000900 0.000300\n0.000500 0.000100\n0.000700 0.000200\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	count := filepath.Join(t.TempDir(), "count")
	mpi := `#!/bin/bash
echo "$*" >>` + argsFile + `
n=$(( $(cat ` + count + ` 2>/dev/null || echo 0) + 1 )); echo $n >` + count + `
read -r own skew < <(sed -n "${n}p" ` + lines + `)
echo "RESULT peer=mpi op=bcast nodes=3 size=1024 algorithm=default interval_ms=0 median=0.001 min=0.001 max=0.001 reps=1 cpu_s=0.0001 timing=scheduled own=$own skew=$skew machine_s=0.00$n"
`
	gloo := `#!/bin/sh
echo "RESULT peer=gloo op=bcast nodes=3 size=1024 algorithm=binomial interval_ms=0 median=0.002 min=0.002 max=0.002 reps=1"
`
	for p, script := range map[string]string{"mpi": mpi, "gloo": gloo} {
		if err := os.WriteFile(filepath.Join(peers, p, "run"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := &Options{Scenario: "broadcast", Nodes: 3, Sizes: []int64{1024}, Bandwidth: Bandwidth{BitsPerSecond: 400e6}, Reps: 3,
		Peers: []string{"mpi", "gloo"}, Testbed: &Testbed{PeersDir: peers,
			Hosts: []string{"198.18.77.1", "198.18.77.2", "198.18.77.3"}, Namespaces: []string{"x-h0", "x-h1", "x-h2"}}}
	r := &runner{o: o, groups: o.groups(), systems: o.systems(), prog: newProgress(io.Discard, false, 6),
		tb: &testbedRun{logDir: t.TempDir()}}
	r.res = [][]Result{make([]Result, len(r.systems))}
	r.times = [][][]time.Duration{make([][]time.Duration, len(r.systems))}
	r.order = [][][]RepOrder{make([][]RepOrder, len(r.systems))}
	r.failed, r.firstErr = [][]int{make([]int, len(r.systems))}, [][]error{make([]error, len(r.systems))}
	r.pinned = [][]string{make([]string, len(r.systems))}
	for si := range r.systems {
		r.res[0][si].Status = StatusOK
	}
	mpiAt := slices.IndexFunc(r.systems, func(s system) bool { return s.name == SysMPIDefault })
	glooAt := slices.IndexFunc(r.systems, func(s system) bool { return s.name == SysGlooDefault })
	for rep := range 3 {
		r.peerRep(t.Context(), 0, mpiAt, rep)
	}
	r.peerRep(t.Context(), 0, glooAt, 0)

	res := r.res[0][mpiAt]
	if res.Status != StatusOK || len(r.times[0][mpiAt]) != 3 {
		t.Fatalf("mpi: %+v, times %v", res, r.times[0][mpiAt])
	}
	if res.Timing != TimingScheduled || res.TimingMethod() != TimingScheduled {
		t.Errorf("mpi's timing %q, want %q", res.Timing, TimingScheduled)
	}
	if got, want := res.ExtraReps["own_s"], []float64{0.0009, 0.0005, 0.0007}; !slices.Equal(got, want) {
		t.Errorf("own_s per rep %v, want %v", got, want)
	}
	if got, want := res.ExtraReps["start_skew_s"], []float64{0.0003, 0.0001, 0.0002}; !slices.Equal(got, want) {
		t.Errorf("start_skew_s per rep %v, want %v", got, want)
	}
	if res.Extra["own_s"] != 0.0007 || res.Extra["start_skew_s"] != 0.0002 {
		t.Errorf("extra %v: want the medians own_s 0.0007, start_skew_s 0.0002", res.Extra)
	}
	if got, want := res.ExtraReps["machine_busy_s"], []float64{0.001, 0.002, 0.003}; !slices.Equal(got, want) {
		t.Errorf("machine_busy_s per rep %v, want %v (the lines' machine_s)", got, want)
	}
	if g := r.res[0][glooAt]; g.Timing != TimingBarrier || g.Extra["own_s"] != 0 {
		t.Errorf("a line without timing=: timing %q, extra %v; want %q and no own_s", g.Timing, g.Extra, TimingBarrier)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(args)), "\n") {
		if !strings.HasSuffix(line, " --start-lead-ms 20") {
			t.Errorf("mpi was launched with %q: want --start-lead-ms 20, the lead ours's members get", line)
		}
	}
}
