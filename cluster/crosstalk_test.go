package cluster

import (
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	pcluster "github.com/asynkron/protoactor-go/cluster"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
)

// Two embedded clusters in one process (or in two test binaries at once)
// name their members alike: node-0, node-1, …. A failure notice of one
// cluster that reaches a member of the other (a late message to an
// address that cluster's member held before) must not expel the other
// cluster's live member of the same name; a notice naming the member at
// its own address still does.
func TestNoticeOfAnotherClusterIsIgnored(t *testing.T) {
	a := start(t, Config{Nodes: 3})
	b := start(t, Config{Nodes: 3})
	evs := recordEvents(t, b)
	target := b.Member(0)
	revokePID := actor.NewPID(target.System().Address(), memberRoot+"/"+revokeName)

	// a's node-1 "failed": its notice, as a's members forward it, lands
	// at b's node-0 and names node-1 at a's address for it.
	late := &messages.RevokeNotice{Origin: "node-2", Subject: "node-1", From: "node-2",
		SubjectAddress: a.Member(1).System().Address()}
	b.System().Root.Send(revokePID, late)
	// And one that names b's node-0 itself, at a's node-0's address.
	b.System().Root.Send(revokePID, &messages.RevokeNotice{Origin: "node-2", Subject: "node-0", From: "node-2",
		SubjectAddress: a.Member(0).System().Address()})
	time.Sleep(500 * time.Millisecond) // a delivered notice is published within milliseconds
	if got := nodeFailures(evs, "node-1"); len(got) != 0 {
		t.Fatalf("a notice about another cluster's node-1 was delivered: %+v", got)
	}
	select {
	case <-target.Done():
		t.Fatalf("b's node-0 stopped on another cluster's notice: %v", target.Err())
	default:
	}
	for i := range 3 {
		if n := len(b.Member(i).Members()); n != 3 {
			t.Fatalf("b's node-%d sees %d members after the late notices, want 3", i, n)
		}
	}

	// The same notice with b's own address for node-1 is about b's
	// node-1: delivered (so the check above could fail).
	own := &messages.RevokeNotice{Origin: "node-2", Subject: "node-1", From: "node-2",
		SubjectAddress: b.Member(1).System().Address()}
	b.System().Root.Send(revokePID, own)
	eventually(t, 10*time.Second, "b's node-0 delivers a notice about its own node-1", func() bool {
		return len(nodeFailures(evs, "node-1")) > 0
	})
}

// At a member's start no handshake is over, so its peer index is empty,
// while the provider's topology already names its peers. Admission must
// ask the topology then: it admitted any notice about a member it had
// not greeted yet, and so a late notice of another process's cluster
// about its "node-1" was forwarded and delivered at a starting node-0.
func TestAdmitNoticeAsksTheTopologyBeforeTheHandshakes(t *testing.T) {
	m := &Member{id: "node-0", log: logrus.NewEntry(quietLog())}
	m.peers.Store(newPeerIndex())
	m.topo.Store(&pcluster.ClusterTopology{Members: []*pcluster.Member{
		{Id: "node-0", Host: "127.0.0.1", Port: 1000},
		{Id: "node-1", Host: "127.0.0.1", Port: 1001},
	}})
	notice := func(subject, addr string) *messages.RevokeNotice {
		return &messages.RevokeNotice{Origin: "node-2", From: "node-2", Subject: subject, SubjectAddress: addr}
	}
	if m.admitNotice(notice("node-1", "127.0.0.1:2001")) {
		t.Fatal("admitted a notice about node-1 at another address than the topology's")
	}
	if !m.admitNotice(notice("node-1", "127.0.0.1:1001")) {
		t.Fatal("refused a notice about node-1 at its topology address")
	}
	// Gone from the topology (dropped before the notice came): admitted,
	// its failure must still be delivered.
	if !m.admitNotice(notice("node-3", "127.0.0.1:1003")) {
		t.Fatal("refused a notice about a member this member does not know")
	}
}
