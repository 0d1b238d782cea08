package bench

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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
	if want := "--op allreduce --size 1048576 --reps 1 --algorithm best hosts=198.18.77.1,198.18.77.2,198.18.77.3 ns=x-h0,x-h1,x-h2\n"; string(args) != want {
		t.Errorf("the script got %q, want %q", args, want)
	}
}
