package processtest

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcessLastMemberStopsAtOnce: the last member of a cluster that
// holds objects, told to stop (SIGTERM), hands nothing off (nobody would
// take it): it exits promptly and says that every object it held is lost,
// the one it copied from a member that left before included, on its
// stdout and in its last log line; it tries to give up no copy.
func TestProcessLastMemberStopsAtOnce(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	first, last := startNode(t, bin, slots[0], seeds), startNode(t, bin, slots[1], seeds)
	first.waitStarted(t, 60*time.Second)
	last.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, first, last)
	copied := randomBytes(21, 1<<20+3)
	putRetry(t, c.of(first), "copied", copied)
	getExact(t, c.of(last), "copied", copied)
	putRetry(t, c.of(last), "big", randomBytes(22, 2<<20))
	putRetry(t, c.of(last), "small", randomBytes(23, 100))

	stop := func(p *nodeProc) time.Duration {
		t.Helper()
		at := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not exit after SIGTERM", p.id)
		}
		if p.exitErr != nil {
			t.Fatalf("%s: exit after SIGTERM: %v\n%s", p.id, p.exitErr, tail(p.stderr.String(), 20))
		}
		return time.Since(at)
	}
	stop(first)
	logged(t, last, "member left the cluster", map[string]string{"left": first.id})

	took := stop(last)
	t.Logf("the last member exited %v after SIGTERM", took.Round(time.Millisecond))
	if !strings.Contains(last.stdout.String(), "left the cluster; 3 objects lost") {
		t.Fatalf("stdout: %s", last.stdout.String())
	}
	var final logEntry
	for _, e := range last.logs() {
		switch e.str("msg") {
		case "leave: could not give up a copy":
			t.Errorf("the last member tried to hand a copy off: %v", e)
		case "member leaving the cluster":
			final = e
		}
	}
	if n, _ := final["lost_objects"].(float64); n != 3 {
		t.Fatalf("final log line %v, want lost_objects=3", final)
	}
}
