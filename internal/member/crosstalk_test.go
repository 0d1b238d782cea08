package member

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pcluster "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/cluster"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
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
	revokePID := freshPID(target.revokePID.Load())

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

// A late notice of another cluster about a member name is admitted when
// the name is not in use here (yet, or any more: the subject may be a
// member the topology dropped already) and remembered by every member's
// broadcaster. Whichever comes first, it and the real failure of this
// cluster's member of that name are told apart by incarnation:
//
//   - the real failure is still delivered everywhere (with the epoch 0
//     every notice carried, it was taken for a duplicate of the late one,
//     and the failed member stayed in every view as a peer never declared
//     dead);
//   - the real failure is published (events.NodeFailed) once on every
//     survivor, and the late notice, about no member of this cluster,
//     never is (FailureLog was keyed by name: the late notice published a
//     NodeFailed, and the real failure then none).
func TestLateNoticeDoesNotHideALaterFailureOfTheSameName(t *testing.T) {
	for _, lateFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("late notice first=%v", lateFirst), func(t *testing.T) {
			b := start(t, Config{Nodes: 3})
			const subject = "node-1#1" // node 1 after its first restart
			const elsewhere = "127.0.0.1:1"
			survivors := []int{0, 2}
			logs := map[int]*eventLog{}
			delivered := map[int]chan struct{}{}
			for _, i := range survivors {
				sys := b.Member(i).System()
				logs[i] = recordEventsOf(t, sys)
				// The late notice's delivery shows as the termination of
				// its subject's endpoint (no member listens there).
				ch := make(chan struct{})
				var once sync.Once
				sub := sys.EventStream.Subscribe(func(e any) {
					if e, ok := e.(*remote.EndpointTerminatedEvent); ok && e.Address == elsewhere {
						once.Do(func() { close(ch) })
					}
				})
				t.Cleanup(func() { sys.EventStream.Unsubscribe(sub) })
				delivered[i] = ch
			}
			sendLate := func() {
				t.Helper()
				// Another cluster's node-1#1, at an address of its own.
				late := &messages.RevokeNotice{Origin: "elsewhere", Subject: subject, From: "elsewhere", SubjectAddress: elsewhere}
				b.System().Root.Send(freshPID(b.Member(0).revokePID.Load()), late)
				ctx := deadline(t, 10*time.Second)
				for _, i := range survivors {
					select {
					case <-delivered[i]:
					case <-ctx.Done():
						t.Fatalf("%s did not deliver the late notice: %v", b.Member(i).ID(), ctx.Err())
					}
					// The members actor handles it before this query.
					if _, err := b.Member(i).System().Root.RequestFuture(b.Member(i).membersPID.Load(), placementQuery{}, 10*time.Second).Result(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if lateFirst {
				sendLate()
			}
			if err := b.Kill(1); err != nil {
				t.Fatal(err)
			}
			if err := b.Restart(1); err != nil {
				t.Fatal(err)
			}
			if id := b.Member(1).ID(); id != subject {
				t.Fatalf("restarted node 1 is %q, want %q", id, subject)
			}
			if err := b.Kill(1); err != nil {
				t.Fatal(err)
			}
			if !lateFirst {
				sendLate()
			}
			for _, i := range survivors {
				m := b.Member(i)
				// The view forgets a peer once it is out of the topology
				// and declared dead; one that is never declared dead stays.
				eventually(t, 10*time.Second, m.ID()+" delivers the failure of "+subject, func() bool {
					res, err := m.System().Root.RequestFuture(m.membersPID.Load(), placementQuery{}, time.Second).Result()
					p, ok := res.(placement)
					if err != nil || !ok {
						return false
					}
					d, known := p.peers[subject]
					return !known || strings.Contains(d, "dead true")
				})
				// Kill returned: every survivor published the failure.
				got := nodeFailures(logs[i], subject)
				if len(got) != 1 || got[0].DetectedBy == "revoke:elsewhere" {
					var seen []string
					for _, e := range got {
						seen = append(seen, e.DetectedBy)
					}
					t.Fatalf("%s published the failure of %s detected by %v, want once, not by the late notice", m.ID(), subject, seen)
				}
			}
		})
	}
}

// A handshake of one embedded cluster's member that reaches a member of
// another cluster (through a loopback port a member of the first held,
// and naming a member of the same name) is answered but not taken: the
// member keeps its own peer of the greeter's name, and the answer says
// which cluster answered, so the greeter does not take it either.
func TestHandshakeOfAnotherClusterIsNotTaken(t *testing.T) {
	a := start(t, Config{Nodes: 2})
	b := start(t, Config{Nodes: 2})
	ctx := deadline(t, 10*time.Second)
	greeter, greeted := a.Member(0), b.Member(1)
	hello := greeter.hello()
	hello.ToMemberId = greeted.ID() // node-1: a's, and b's
	res, err := actorutil.Request(ctx, greeter.System().Root, HelloPID(greeted.Address()), hello)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*messages.MemberHelloReply)
	if !ok || r.GetMemberId() != greeted.ID() {
		t.Fatalf("hello answered %v", res)
	}
	if r.GetCluster() == greeter.cfg.ClusterName {
		t.Fatalf("two embedded clusters answer as the same cluster %q", r.GetCluster())
	}
	// Asked after the hello, from the same mailbox: its outcome is in.
	res, err = greeted.System().Root.RequestFuture(greeted.membersPID.Load(), placementQuery{}, 10*time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	own := b.Member(0)
	if d := res.(placement).peers[own.ID()]; !strings.Contains(d, own.Node().GetActorId()) || !strings.HasPrefix(d, "compatible") {
		t.Fatalf("b's %s holds its peer %s as %q after a's %s greeted it; want b's own (store %s)",
			greeted.ID(), own.ID(), d, greeter.ID(), own.Node().GetActorId())
	}
}
