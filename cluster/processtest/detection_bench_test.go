package processtest

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

// BenchmarkProcessFailureDetection measures how long after a SIGKILL the
// first survivor publishes a member's failure, on three `hoplite node`
// processes: each iteration kills one member and restarts it at the same
// address. The figure is a benchmark, not a test's bound: on a loaded
// machine it grows with the scheduling delay, which says nothing about
// correctness.
//
//	go test -run '^$' -bench ProcessFailureDetection -benchtime 10x ./cluster/processtest/
func BenchmarkProcessFailureDetection(b *testing.B) {
	bin := hopliteBinary(b)
	slots, seeds := memberSlots(b, 3)
	nodes := make([]*nodeProc, 3)
	for i := range nodes {
		nodes[i] = startNode(b, bin, slots[i], seeds)
	}
	for _, n := range nodes {
		n.waitStarted(b, 60*time.Second)
	}
	c := newTestClient(b)
	c.converge(b, nodes...)
	var detections []time.Duration
	b.ResetTimer()
	for i := range b.N {
		victim := nodes[i%len(nodes)]
		survivors := without(nodes, victim)
		killed := time.Now()
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		<-victim.exited
		first, _ := firstDetection(b, survivors, victim, killed)
		detections = append(detections, first)
		b.StopTimer()
		nu := startNode(b, bin, victim.slot, seeds)
		nu.waitStarted(b, 60*time.Second)
		nodes = replace(nodes, victim, nu)
		c.converge(b, nodes...)
		b.StartTimer()
	}
	slices.Sort(detections)
	b.ReportMetric(float64(detections[len(detections)/2].Microseconds())/1000, "ms-detect-p50")
	b.ReportMetric(float64(detections[len(detections)-1].Microseconds())/1000, "ms-detect-max")
}
