package cluster

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// A Put followed by a Get on another member costs two control round trips
// with the directory — the Put's CreateObject and the Get's Locate — for an
// inline object and for one whose bytes move on the data plane. Everything
// else the directory hears about the object is one-way (publications and
// FetchDone).
func TestPutThenRemoteGetCostsTwoControlRoundTrips(t *testing.T) {
	var mu sync.Mutex
	seen := map[string][]string{} // object -> message types its shard received
	l := start(t, Config{Nodes: 3, ShardHook: func(_ string, msg any) {
		m, ok := msg.(interface{ GetObjectId() string })
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		seen[m.GetObjectId()] = append(seen[m.GetObjectId()], fmt.Sprintf("%T", msg))
	}})
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
		// were answered before the calls returned.
		eventually(t, 10*time.Second, id+": the Put's and the Get's reports arrive", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return count(seen[id], "*messages.PublishLocation")+count(seen[id], "*messages.FetchDone") >= 2
		})
		mu.Lock()
		msgs := slices.Clone(seen[id])
		mu.Unlock()
		requests := count(msgs, "*messages.CreateObject") + count(msgs, "*messages.Locate")
		oneWay := count(msgs, "*messages.PublishLocation") + count(msgs, "*messages.FetchDone")
		if requests != 2 || count(msgs, "*messages.CreateObject") != 1 || len(msgs) != requests+oneWay {
			t.Fatalf("%s (%d B): the directory received %v; want one CreateObject, one Locate and one-way reports only", id, size, msgs)
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
