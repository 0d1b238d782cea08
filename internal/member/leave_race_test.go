package member

import (
	"testing"
	"time"
)

// A member that left is forgotten by the survivors' views once the
// topology shows its end (the view keeps no dead peer out of the
// topology). Its connection closing after that is the same end, not a
// failure: the failure detector's report of it must not spread a notice
// (TestProcessGracefulLeave and TestMemberStopIsALeave saw a survivor
// call a member that left failed when the topology's news came before
// the connection's).
func TestConnectionCloseAfterALeaveSpreadsNoNotice(t *testing.T) {
	log, hook := hookedLogger(t)
	ms := joinMembers(t, 3, log)
	leaver, survivor := ms[2], ms[0]
	addr := leaver.System().Address()
	leaver.Stop()
	members := survivor.membersPID.Load()
	peers := func() map[string]string {
		res, err := survivor.System().Root.RequestFuture(members, placementQuery{}, 10*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(placement).peers
	}
	eventually(t, 20*time.Second, "the survivor forgets the member that left", func() bool {
		_, known := peers()[leaver.ID()]
		return logged(hook, survivor.ID(), "member left the cluster") && !known
	})
	survivor.System().Root.Send(members, &memberGone{id: leaver.ID(), address: addr, signal: "remote endpoint terminated"})
	peers() // the report above is handled before this answer
	for _, e := range entriesOf(hook, survivor.ID()) {
		for _, line := range failureLines {
			if e.Message == line {
				t.Fatalf("%s logged %q %v for a member that left", survivor.ID(), e.Message, e.Data)
			}
		}
	}
}
