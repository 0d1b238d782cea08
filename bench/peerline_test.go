package bench

import (
	"strings"
	"testing"
)

func TestParsePeerResult(t *testing.T) {
	r, err := ParsePeerResult("RESULT peer=mpi op=bcast nodes=8 size=33554432 algorithm=best interval_ms=0 median=1.14 min=1.12 max=1.20 reps=3")
	if err != nil {
		t.Fatal(err)
	}
	want := PeerResult{Peer: "mpi", Op: "bcast", Algorithm: "best", Nodes: 8, Size: 32 << 20, Median: 1.14, Min: 1.12, Max: 1.20, Reps: 3}
	if r != want {
		t.Errorf("got %+v, want %+v", r, want)
	}
	// algorithm and interval_ms are optional; seconds may carry an s.
	r, err = ParsePeerResult("  RESULT peer=dask op=reduce nodes=4 size=1024 interval_ms=12.5 median=0.5s min=0.25s max=0.75s reps=5\n")
	if err != nil || r.Algorithm != "" || r.IntervalMs != 12.5 || r.Median != 0.5 || r.Reps != 5 {
		t.Errorf("got %+v, %v", r, err)
	}
	// cpu_s, when given, is the CPU of one call, all ranks together.
	r, err = ParsePeerResult("RESULT peer=mpi op=reduce nodes=8 size=1024 median=0.001 min=0.001 max=0.002 reps=5 cpu_s=0.0125")
	if err != nil || r.CPU != 0.0125 {
		t.Errorf("got %+v, %v; want cpu 0.0125", r, err)
	}
	// timing=, own= and skew=: how the peer timed its reps, the slowest
	// rank from its own start and the ranks' start skew.
	r, err = ParsePeerResult("RESULT peer=gloo op=bcast nodes=8 size=1024 median=0.0004 min=0.0003 max=0.0009 reps=1 timing=scheduled own=0.00025 skew=0.0001")
	if err != nil || r.Timing != TimingScheduled || !r.HasOwn || r.Own != 0.00025 || r.Skew != 0.0001 {
		t.Errorf("got %+v, %v; want timing scheduled, own 0.00025, skew 0.0001", r, err)
	}
	// machine_s: the whole machine's busy CPU over a call.
	r, err = ParsePeerResult("RESULT peer=gloo op=allreduce nodes=8 size=1024 median=1.3 min=1.2 max=1.4 reps=5 cpu_s=0.7 machine_s=1.25")
	if err != nil || !r.HasMachine || r.Machine != 1.25 || r.CPU != 0.7 {
		t.Errorf("got %+v, %v; want machine 1.25 beside cpu 0.7", r, err)
	}
	if r, err := ParsePeerResult("RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1"); err != nil || r.Timing != "" || r.HasOwn || r.HasMachine {
		t.Errorf("a line that does not say how it was timed: %+v, %v", r, err)
	}
	for _, bad := range []string{
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 timing=whenever",   // unknown method
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 own=0.5",           // own without skew
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 own=0.5 skew=-0.1", // negative skew
		"",
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 cpu_s=-1", // negative CPU
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 machine_s=-0.5",
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 machine_s=x",
		"peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1",          // no RESULT
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1",          // no reps
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=x min=1 max=1 reps=1",   // not a number
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=2 max=3 reps=1",   // min > median
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=NaN min=1 max=1 reps=1", // NaN
		"RESULT peer=mpi op=bcast nodes=-8 size=1 median=1 min=1 max=1 reps=1",  // negative count
		"RESULT peer=mpi peer=dask op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1",
		"RESULT peer=mpi op=bcast nodes=8 size=1 median=1 min=1 max=1 reps=1 junk",
	} {
		if r, err := ParsePeerResult(bad); err == nil {
			t.Errorf("ParsePeerResult(%q) = %+v, want an error", bad, r)
		}
	}
	out := "mpirun: starting\nRESULT peer=mpi op=p2p nodes=2 size=8 median=1 min=1 max=1 reps=1\nnoise RESULT\nRESULT peer=mpi op=p2p nodes=2 size=16 median=2 min=1 max=3 reps=3\n"
	rs, err := FindPeerResults(strings.NewReader(out))
	if err != nil || len(rs) != 2 || rs[1].Size != 16 {
		t.Errorf("FindPeerResults = %+v, %v", rs, err)
	}
	if _, err := FindPeerResults(strings.NewReader("RESULT peer=mpi\n")); err == nil {
		t.Error("a malformed RESULT line was ignored")
	}
}
