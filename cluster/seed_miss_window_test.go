package cluster

import (
	"testing"
	"time"
)

// TestSeedProviderFastMissesWaitTheTimeouts: misses that come at once
// (a busy member's manage port resetting the connections, an error
// status) drop a member no sooner than misses that time out would: its
// misses-th miss at least (misses-1) check timeouts after its first.
func TestSeedProviderFastMissesWaitTheTimeouts(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	b := newFakeMember(t, "b", seedTestCluster, nil)
	p := testSeedProvider(t, 3, 300*time.Millisecond, nil, a.host(), b.host())
	wantIDs(t, "both healthy", roundIDs(t, p), "a", "b")
	a.mode.Store(failing)
	first := time.Now()
	for range 5 {
		ids := roundIDs(t, p)
		if time.Since(first) >= 500*time.Millisecond {
			break // too slow a machine to tell: the window may have passed
		}
		wantIDs(t, "a missed fast", ids, "a", "b")
	}
	time.Sleep(time.Until(first.Add(700 * time.Millisecond)))
	wantIDs(t, "a missed past two timeouts after its first miss", roundIDs(t, p), "b")
}
