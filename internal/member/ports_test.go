package member

import (
	"testing"
	"time"
)

// A port handed to a member is not handed to another within
// portQuarantine, and is again after it: a long soak in one process
// must not run out of ports.
func TestFreshLoopbackPortQuarantine(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p, err := freshLoopbackPort()
		if err != nil {
			t.Fatal(err)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice within the quarantine", p)
		}
		seen[p] = true
	}
	now := time.Now()
	used := map[int]time.Time{1: now.Add(-portQuarantine / 2), 2: now.Add(-2 * portQuarantine)}
	if loopbackPortFree(used, 1, now) || !loopbackPortFree(used, 2, now) || !loopbackPortFree(used, 3, now) {
		t.Fatal("a port is free when nobody had it or its quarantine is over, and only then")
	}
}
