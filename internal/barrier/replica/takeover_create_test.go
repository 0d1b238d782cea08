package replica

import (
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A primary that dies right after answering the client's BarrierCreate
// may never have sent its request to create a backup. The backup that
// takes over asks that host to create its replica ahead of the sync, so
// the replica exists, syncs, and acknowledges a later close; a backup the
// cluster declared failed is not asked. (Without the request the close
// waited for an ack from a host with no replica and answered TIMEOUT:
// TestCloseAfterTakeoverWaitsOnlyForLiveReplicas failed about once in 40.)
func TestTakeoverCreatesABackupTheOldPrimaryNeverCreated(t *testing.T) {
	o := &messages.BarrierOptions{MaxParticipants: 3, TakeoverAfterMs: 100}
	for _, declaredDown := range []bool{false, true} {
		n := newNet(t, 3, o, nil)
		old, missing := n.hosts[0], n.hosts[1]
		n.down[old.String()] = true
		// Rank 1's host never got its create: no replica there (sends to
		// it collect in n.out).
		delete(n.replicas, missing.String())
		n.down[missing.String()] = true
		taker := n.r(2)
		// The old primary's member was declared failed: the close does
		// not wait for it.
		n.deliver(n.hosts[2], taker.onMemberDown("node-0", old.GetAddress()))
		if declaredDown {
			n.deliver(n.hosts[2], taker.onMemberDown("node-1", missing.GetAddress()))
		}
		n.deliver(n.hosts[2], taker.onStatus(ms(1), &messages.BarrierStatus{Name: "b", RequestId: 1}, participant(0)))
		for i := 0; i < 10 && !taker.Acting(); i++ {
			n.deliver(n.hosts[2], taker.onTick(taker.NextWake()))
		}
		if !taker.Acting() {
			t.Fatalf("declared down %v: rank 2 never took over", declaredDown)
		}
		sent := n.sentTo(missing)
		if declaredDown {
			for _, m := range sent {
				if _, ok := m.(*messages.BarrierCreate); ok {
					t.Fatalf("a backup the cluster declared failed was asked to create its replica: %v", sent)
				}
			}
			continue
		}
		if len(sent) == 0 {
			t.Fatal("the new primary sent nothing to the backup's host")
		}
		c, ok := sent[0].(*messages.BarrierCreate)
		if !ok || c.GetRank() != 1 || !c.GetFromPrimary() || len(c.GetReplicas()) != 3 {
			t.Fatalf("first message to the host without the replica: %v, want a BarrierCreate of rank 1 from the primary ahead of the sync", sent[0])
		}
		// The host creates it as its manager would, and the sync that
		// followed reaches it.
		r, e, err := New(Config{Name: c.GetName(), Options: c.GetOptions(), Replicas: n.hosts, Members: c.GetReplicaMembers(), Rank: int(c.GetRank())}, ms(500))
		if err != nil {
			t.Fatal(err)
		}
		n.replicas[missing.String()] = r
		delete(n.down, missing.String())
		n.deliver(missing, e)
		for _, m := range sent[1:] {
			if rep, ok := m.(*messages.BarrierReplicate); ok {
				n.deliver(missing, r.onReplicate(ms(500), rep))
			}
		}
		if r.Epoch() != taker.Epoch() || r.Seq() != taker.Seq() {
			t.Fatalf("the created backup is at epoch %d seq %d, the primary at %d, %d", r.Epoch(), r.Seq(), taker.Epoch(), taker.Seq())
		}
		// A close now settles with the created backup's ack, before any
		// deadline.
		n.deliver(n.hosts[2], taker.onClose(ms(501), &messages.BarrierClose{Name: "b", RequestId: 9}, participant(1)))
		got := n.closedTo(participant(1))
		if len(got) != 1 || got[0].GetError() != nil {
			t.Fatalf("the closer got %v, want one BarrierClosed without error", got)
		}
		if !r.Closed() {
			t.Fatal("the created backup did not apply the close")
		}
	}
}
