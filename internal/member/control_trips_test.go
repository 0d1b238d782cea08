package member

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A Put followed by a Get on another member costs two control round trips
// with the directory — the Put's CreateObject and the Get's Locate — for an
// inline object and for one whose bytes move on the data plane. Everything
// else the directory hears about the object is one-way (publications and
// FetchDone), and an inline Get sends nothing after its Locate: the shard
// records the receiver's copy when it answers. The inline object's Locate
// is answered from the table's published objects, without the shard's
// actor (directory.InlineIndex), which hears only the CreateObject: the
// Put comes from its node's process (the fast Put), so the shard records
// the creator's copy COMPLETE at its registration and no publication
// follows.
func TestPutThenRemoteGetCostsTwoControlRoundTrips(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // object -> message types its shard received
	pubs := map[string]int{}      // object@member -> its publications
	l := start(t, Config{Nodes: 3, hooks: testhooks.Set{Shard: func(_ string, msg any) {
		m, ok := msg.(interface{ GetObjectId() string })
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen[m.GetObjectId()] = append(seen[m.GetObjectId()], fmt.Sprintf("%T", msg))
		if p, ok := msg.(*messages.PublishLocation); ok {
			pubs[p.GetObjectId()+"@"+p.GetNode().GetNodeId()]++
		}
	}}})
	ctx := deadline(t, 20*time.Second)
	for _, size := range []int{1 << 10, 1 << 20} {
		id := fmt.Sprintf("trips-%d", size)
		data := testutil.Pattern(byte(size), size)
		if err := l.Client(0).Put(ctx, id, data); err != nil {
			t.Fatal(err)
		}
		got, err := l.Client(2).Get(ctx, id)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("get %s: %v", id, err)
		}
		// The one-way reports may still be on their way; the requests
		// were answered before the calls returned. An Info from the Get's
		// member reaches the shard after whatever that member sent it
		// before (one ordered connection per pair of members), and must
		// list its copy.
		info, err := l.Client(2).Info(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(info.GetLocations(), func(l *messages.Location) bool {
			return l.GetNode().GetNodeId() == "node-2" && l.GetState() == messages.LocationState_COMPLETE
		}) {
			t.Errorf("%s: the directory lists %v, not the Get's copy on node-2", id, info.GetLocations())
		}
		inline := size < 64<<10
		if inline {
			// An Info from the Put's member goes through its store node,
			// after whatever that node sent the shard once the Put
			// returned: a COMPLETE publication would be there first.
			info, err := l.Client(0).Info(ctx, id, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(info.GetLocations(), func(l *messages.Location) bool {
				return l.GetNode().GetNodeId() == "node-0" && l.GetState() == messages.LocationState_COMPLETE
			}) {
				t.Errorf("%s: the directory lists %v, not the creator's copy on node-0 COMPLETE", id, info.GetLocations())
			}
			mu.Lock()
			creatorPubs := pubs[id+"@node-0"]
			mu.Unlock()
			if creatorPubs != 0 {
				t.Errorf("%s: the Put's member published its copy %d times; the shard recorded it COMPLETE at the registration", id, creatorPubs)
			}
		} else {
			eventually(t, 10*time.Second, id+": the Put's publication arrives", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return pubs[id+"@node-0"] > 0
			})
		}
		mu.Lock()
		var msgs []string
		for _, m := range seen[id] {
			if m != "*messages.QueryObject" { // the test's own Info
				msgs = append(msgs, m)
			}
		}
		receiverPubs := pubs[id+"@node-2"]
		mu.Unlock()
		requests := count(msgs, "*messages.CreateObject") + count(msgs, "*messages.Locate")
		oneWay := count(msgs, "*messages.PublishLocation") + count(msgs, "*messages.FetchDone")
		locates := 1
		if inline {
			locates = 0 // answered without the actor
		}
		if requests != 1+locates || count(msgs, "*messages.CreateObject") != 1 || len(msgs) != requests+oneWay || (inline && receiverPubs != 0) {
			t.Fatalf("%s (%d B): the shard's actor received %v, %d publications by the Get's member; want one CreateObject, %d Locates and one-way reports only (none from an inline Get)", id, size, msgs, receiverPubs, locates)
		}
		t.Logf("%d B: %d control round trips, %d one-way reports (%v)", size, requests, oneWay, msgs)
	}
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}
