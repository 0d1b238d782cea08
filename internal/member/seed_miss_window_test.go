package member

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSeedProviderFastMissesWaitTheTimeouts: misses that come at once
// (a busy member's manage port resetting the connections, an error
// status) drop a member no sooner than misses that time out would: its
// misses-th miss at least (misses-1) check timeouts after its first. The
// provider judges misses by its clock, which the test sets: the rule is
// checked whatever the machine's speed.
func TestSeedProviderFastMissesWaitTheTimeouts(t *testing.T) {
	a := newFakeMember(t, "a", seedTestCluster, nil)
	b := newFakeMember(t, "b", seedTestCluster, nil)
	p := testSeedProvider(t, 3, 300*time.Millisecond, nil, a.host(), b.host())
	base := time.Now()
	var offset atomic.Int64 // the provider's time since base
	p.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	wantIDs(t, "both healthy", roundIDs(t, p), "a", "b")
	a.mode.Store(failing)
	// Five misses within 100 ms: past misses, not past the window.
	for i := range 5 {
		offset.Store(int64(time.Duration(i) * 25 * time.Millisecond))
		wantIDs(t, "a missed fast", roundIDs(t, p), "a", "b")
	}
	// The window (two timeouts after the first miss) has passed.
	offset.Store(int64(700 * time.Millisecond))
	wantIDs(t, "a missed past two timeouts after its first miss", roundIDs(t, p), "b")
}
