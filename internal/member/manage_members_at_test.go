package member

import (
	"net/netip"
	"testing"
)

// A source that hosts many members gets perMemberConns connections for
// each at the manage port: 48 members on one host hold about 5 each at
// every other member's manage port (health checks and seed exchanges),
// past the fixed bound per source; and perMemberPending of them pending.
func TestManageBoundGrowsWithTheMembersOfASource(t *testing.T) {
	local, other := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	l := manageLimits{PerSource: 128, MembersAt: func(ip netip.Addr) int {
		if ip == local {
			return 47
		}
		return 0
	}}
	if got := l.perSource(local); got != 47*perMemberConns {
		t.Fatalf("a source of 47 members may hold %d connections, want %d", got, 47*perMemberConns)
	}
	l.PendingPerSource = 32
	if got := l.pendingPerSource(local); got != 47*perMemberPending {
		t.Fatalf("a source of 47 members may have %d connections pending, want %d", got, 47*perMemberPending)
	}
	if got := l.pendingPerSource(other); got != 32 {
		t.Fatalf("a source of no member may have %d connections pending, want 32", got)
	}
	if got := l.perSource(other); got != 128 {
		t.Fatalf("a source of no member may hold %d connections, want 128", got)
	}
	l.MembersAt = nil
	if got := l.perSource(local); got != 128 {
		t.Fatalf("without MembersAt: %d, want 128", got)
	}
}
