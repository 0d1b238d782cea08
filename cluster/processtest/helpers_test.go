package processtest

import (
	"fmt"
	"testing"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// memberSlot is one member's ports: its actor system and its manage port.
type memberSlot struct{ bind, manage string }

// memberSlots returns n free loopback slots and the seeds (every manage
// endpoint).
func memberSlots(t *testing.T, n int) ([]memberSlot, []string) {
	ports := freePorts(t, 2*n)
	var slots []memberSlot
	var seeds []string
	for i := 0; i < n; i++ {
		s := memberSlot{bind: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), manage: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		slots = append(slots, s)
		seeds = append(seeds, s.manage)
	}
	return slots, seeds
}

func freePorts(t testing.TB, n int) []int { return testutil.FreePorts(t, n) }

// syncBuffer collects a process's output.
type syncBuffer = testutil.SyncBuffer

// randomBytes are n bytes drawn from seed.
func randomBytes(seed uint64, n int) []byte { return testutil.RandomBytes(seed, n) }
