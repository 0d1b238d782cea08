package processtest

import (
	"runtime"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/timerslack"
)

// A member process runs with hoplite node's timer slack (it sets it and
// executes itself again, keeping its process id and its output), and with
// -timer-slack 0 with the one it was started with; both join one cluster.
func TestProcessTimerSlack(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	set := startNode(t, bin, slots[0], seeds)
	kept := startNode(t, bin, slots[1], seeds, "-timer-slack", "0")
	set.waitStarted(t, 60*time.Second)
	kept.waitStarted(t, 60*time.Second)
	if set.slack != "1ms" {
		t.Errorf("a member at the default: timer slack %q, want 1ms", set.slack)
	}
	runtime.LockOSThread()
	own, err := timerslack.Current() // what the test's threads pass on to their children
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	if kept.slack != own.String() {
		t.Errorf("a member with -timer-slack 0: timer slack %q, want %v, its parent's", kept.slack, own)
	}
	c := newTestClient(t)
	c.converge(t, set, kept)
	data := randomBytes(21, 3<<20+1)
	putRetry(t, c.of(set), "slack", data)
	getExact(t, c.of(kept), "slack", data)
}
