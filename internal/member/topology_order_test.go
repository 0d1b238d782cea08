package member

import (
	"slices"
	"strings"
	"testing"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
)

// A topology the provider published before a newer one can reach the
// members actor after it: Join sends the last one it saw while the
// subscription may already have sent a newer one. Applied, it took back
// the members that had joined in between, and this member spread a
// failure notice about each of them although they ran (8 members
// starting under load: "the members did not converge ... node-4:
// compatible, in topology true, dead true"). It must change nothing.
func TestStaleTopologyChangesNothing(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	m := l.Member(0)
	members := m.membersPID.Load()
	// The provider's current topology, as the subscription sends it...
	current := &topologyUpdate{topology: m.topo.Load(), seq: m.topologySeq.Add(1)}
	// ... and then the one it published before: node-0 alone, the first
	// node-0 could have seen.
	var self []*pcluster.Member
	for _, mem := range current.topology.GetMembers() {
		if mem.GetId() == m.id {
			self = append(self, mem)
		}
	}
	if len(current.topology.GetMembers()) != 3 || len(self) != 1 {
		t.Fatalf("node-0's topology lists %v", current.topology.GetMembers())
	}
	m.system.Root.Send(members, current)
	m.system.Root.Send(members, &topologyUpdate{topology: &pcluster.ClusterTopology{Members: self}, seq: current.seq - 1})
	// Answered after the stale topology (one sender, one mailbox).
	res, err := m.system.Root.RequestFuture(members, placementQuery{}, 5*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	p := res.(placement)
	want := []string{"node-0", "node-1", "node-2"}
	if !slices.Equal(p.live, want) {
		t.Fatalf("after a stale topology node-0 places on %v, want %v (%v)", p.live, want, p.peers)
	}
	for id, d := range p.peers {
		if !strings.Contains(d, "in topology true, dead false") {
			t.Errorf("after a stale topology node-0 holds %s: %s", id, d)
		}
	}
	// Nobody heard of a failure either.
	for i := range 3 {
		if n := len(l.Member(i).Members()); n != 3 {
			t.Errorf("node-%d sees %d members, want 3", i, n)
		}
	}
}
