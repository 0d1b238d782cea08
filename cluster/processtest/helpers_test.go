package processtest

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// memberSlot is one member's ports: its actor system and its manage port.
type memberSlot struct{ bind, manage string }

// memberSlots returns n free loopback slots and the seeds (every manage
// endpoint).
func memberSlots(t testing.TB, n int) ([]memberSlot, []string) {
	binds, seeds := testutil.MemberSlots(t, n)
	var slots []memberSlot
	for i := range binds {
		slots = append(slots, memberSlot{bind: binds[i], manage: seeds[i]})
	}
	return slots, seeds
}

func freePorts(t testing.TB, n int) []int { return testutil.FreePorts(t, n) }

// syncBuffer collects a process's output.
type syncBuffer = testutil.SyncBuffer

// randomBytes are n bytes drawn from seed.
func randomBytes(seed uint64, n int) []byte { return testutil.RandomBytes(seed, n) }

// startConverged starts a member process in each of slots, waits for
// their start lines and until their views agree on exactly them, and
// returns them with the test binary's client and that view.
func startConverged(t testing.TB, bin string, slots []memberSlot, seeds []string) ([]*nodeProc, *testClient, []string) {
	t.Helper()
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startNode(t, bin, s, seeds))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	return nodes, c, c.converge(t, nodes...)
}
