//go:build linux

package processtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkScaleMemberlist measures hashicorp/memberlist (SWIM with
// Lifeguard, at its default LAN settings; bench/peers/memberlist, a
// module of its own) as BenchmarkScaleConvergence measures Hoplite's
// membership, for the same N and on the same testbed
// (HOPLITE_SCALE_TESTBED): how long until every member lists all N, what
// an idle member costs, whether a member SIGSTOPped for 3 s stays, and
// how long until every member lists a SIGKILLed one as gone. Building the
// probe takes the Go module proxy the first time.
//
//	HOPLITE_SCALE_TESTBED=50mbit HOPLITE_SCALE_MEMBERS=8,24,64 go test -run '^$' -bench BenchmarkScaleMemberlist -benchtime 1x ./cluster/processtest/
func BenchmarkScaleMemberlist(b *testing.B) {
	sizes := scaleSizes(b)
	if len(sizes) == 0 {
		sizes = []int{8}
	}
	dir, err := filepath.Abs("../../bench/peers/memberlist")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "memberlist-probe")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build the memberlist probe: %v\n%s", err, out)
	}
	var bed *scaleBed
	name := "memberlist"
	if bw := os.Getenv("HOPLITE_SCALE_TESTBED"); bw != "" {
		bed = startScaleBed(b, slicesMax(sizes), bw)
		name += "-testbed-" + bw
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			r := measureMemberlist(b, bed, bin, n)
			b.Logf("%s N=%d converged=%v in %v; idle: %.4f CPU-s/s per member, %.0f B/s syscall I/O per member (datagrams uncounted; %v window; loadavg %s); paused member kept %v; killed member out of every list in %v; %.0f B/s sent per member on its link (testbed)",
				name, n, r.converged, r.convergence.Round(10*time.Millisecond), r.cpuPerMember, r.ioPerMember, scaleIdle, r.load, r.pauseKept, r.killGone.Round(time.Millisecond), r.netPerMember)
			if !r.converged {
				b.Errorf("memberlist N=%d did not converge: %s", n, r.lag)
			}
		})
	}
}

func slicesMax(xs []int) int {
	m := xs[0]
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// probeEvent is the Unix time of the first line of p's output that is
// what, or 0.
func probeEvent(p *nodeProc, what string, after int64) int64 {
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		ts, rest, ok := strings.Cut(line, " ")
		if !ok || rest != what {
			continue
		}
		if t, err := strconv.ParseInt(ts, 10, 64); err == nil && t >= after {
			return t
		}
	}
	return 0
}

func measureMemberlist(t testing.TB, bed *scaleBed, bin string, n int) scaleResult {
	var slots []memberSlot
	if bed != nil {
		slots, _ = bed.slots(n)
	} else {
		slots, _ = memberSlots(t, n)
	}
	var binds []string
	for _, s := range slots {
		binds = append(binds, s.bind)
	}
	start := time.Now()
	nodes := make([]*nodeProc, n)
	for i := range nodes {
		args := []string{bin, "-bind", slots[i].bind, "-seeds", strings.Join(binds, ","), "-n", strconv.Itoa(n)}
		if bed != nil {
			args = append(bed.wrap(i, n), args...)
		}
		nodes[i] = startProc(t, slots[i], args)
		nodes[i].id = slots[i].bind
	}
	var r scaleResult
	for end := start.Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var last int64
		waiting := 0
		for _, p := range nodes {
			ts := probeEvent(p, "converged", 0)
			if ts == 0 {
				waiting++
			}
			last = max(last, ts)
		}
		if waiting == 0 {
			r.converged, r.convergence = true, time.Unix(0, last).Sub(start)
			break
		}
		if time.Now().After(end) {
			r.lag = fmt.Sprintf("%d of %d members never listed all", waiting, n)
			return r
		}
	}
	time.Sleep(5 * time.Second)
	cpu0, io0 := procTotals(t, nodes)
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
	r.cpuPerMember = (cpu1 - cpu0) / secs / float64(n)
	r.ioPerMember = float64(io1-io0) / secs / float64(n)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			r.load = strings.Join(f[:3], " ")
		}
	}
	paused := nodes[0]
	pausedAt := time.Now().UnixNano()
	if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(scalePause)
	if err := paused.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	r.pauseKept = true
	for _, p := range nodes[1:] {
		if probeEvent(p, "leave "+paused.id, pausedAt) != 0 {
			r.pauseKept = false
		}
	}
	victim := nodes[n/2]
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	r.killGone = -1
	for end := killed.Add(2 * time.Minute); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var last int64
		all := true
		for _, p := range without(nodes, victim) {
			ts := probeEvent(p, "leave "+victim.id, killed.UnixNano())
			if ts == 0 {
				all = false
				break
			}
			last = max(last, ts)
		}
		if all {
			r.killGone = time.Unix(0, last).Sub(killed)
			break
		}
	}
	return r
}
