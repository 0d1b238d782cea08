package main

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// A comparison's repetitions interleave across its systems unless
// --sequential asks for the order from before; the JSON says which,
// and where each repetition ran. (In process: ours and naive.)
func TestBenchSequentialFlag(t *testing.T) {
	if legacyP2P([]string{"--sequential"}) {
		t.Error("bench p2p --sequential is the loopback benchmark's, want the scenario runner's")
	}
	for _, c := range []struct {
		flag        []string
		order       string
		ours, naive []bench.RepOrder
	}{
		{nil, bench.OrderInterleaved, []bench.RepOrder{{Rep: 1, Seq: 1}, {Rep: 2, Seq: 4}}, []bench.RepOrder{{Rep: 1, Seq: 2}, {Rep: 2, Seq: 3}}},
		{[]string{"--sequential"}, bench.OrderSequential, []bench.RepOrder{{Rep: 1, Seq: 1}, {Rep: 2, Seq: 2}}, []bench.RepOrder{{Rep: 1, Seq: 3}, {Rep: 2, Seq: 4}}},
	} {
		js := filepath.Join(t.TempDir(), "r.json")
		args := append([]string{"bench", "broadcast", "--nodes", "3", "--size", "64KiB", "--reps", "2", "--warmup", "0",
			"--peers", "naive", "--bandwidth", "4gbit", "--json", js}, c.flag...)
		code, stdout, stderr := hoplite(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, stdout, stderr)
		}
		r, err := bench.ReadJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		if r.RunOrder != c.order {
			t.Errorf("%v: run order %q, want %q", c.flag, r.RunOrder, c.order)
		}
		for _, res := range r.Results {
			want := map[string][]bench.RepOrder{bench.SysOurs: c.ours, bench.SysNaive: c.naive}[res.System]
			if !slices.Equal(res.Order, want) || len(res.Times) != 2 {
				t.Errorf("%v: %s ran at %+v (times %v), want %+v", c.flag, res.System, res.Order, res.Times, want)
			}
		}
	}
}
