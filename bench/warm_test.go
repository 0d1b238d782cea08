package bench

import (
	"strings"
	"testing"
)

// ours-cold's nodes report ready without their warm-up, ours-lazy-free's
// run with the Go runtime's lazy return of freed memory; ours's do
// neither. Both need the testbed.
func TestTestbedNodeArgsColdAndLazyFree(t *testing.T) {
	o, err := (&Options{Scenario: "broadcast", Nodes: 2, NodeProcs: 1, Peers: []string{"cold", "lazy-free"}}).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	tb := &testbedRun{o: o, tb: &Testbed{Namespaces: []string{"x-h0", "x-h1"}, Binary: "/bin/hoplite"}}
	want := map[string][2]string{ // prefix, and a flag the line has ("" none)
		SysOurs:     {"netns exec x-h0 env GOMAXPROCS=1 /bin/hoplite node ", ""},
		SysOursCold: {"netns exec x-h0 env GOMAXPROCS=1 /bin/hoplite node ", " -experiments no-warm-up,bench-agent"},
		SysLazyFree: {"netns exec x-h0 env GOMAXPROCS=1 GODEBUG=madvdontneed=0 /bin/hoplite node ", ""},
	}
	seen := 0
	for _, s := range o.systems() {
		w, ok := want[s.name]
		if !ok {
			t.Errorf("unexpected system %s", s.name)
			continue
		}
		seen++
		args := strings.Join(tb.nodeArgs(0, s, "198.18.77.1:20000", 30000, nil), " ")
		if !strings.HasPrefix(args, w[0]) || (w[1] != "") != strings.Contains(args, "no-warm-up") ||
			(s.name != SysLazyFree) == strings.Contains(args, "GODEBUG") {
			t.Errorf("%s: %s", s.name, args)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of %d systems", seen, len(want))
	}
	// In process they are skipped: the embedded cluster has neither.
	r := smoke(t, Options{Scenario: "broadcast", Sizes: []int64{1 << 10}, Peers: []string{"cold", "lazy-free"}})
	for _, res := range r.Results {
		if res.System != SysOurs && (res.Status != StatusSkipped || res.Reason != "needs --testbed") {
			t.Errorf("%s in process: %s %q", res.System, res.Status, res.Reason)
		}
	}
}
