package storeactor

import (
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
)

// A StoreReduced comes from another process (a Reduce's coordinator): one
// whose target no application could name, without a reduce id, or larger
// than the node, is refused as a Put would be, before the node makes a
// copy or asks the directory; a good one after them is stored.
func TestStoreReducedIsCheckedAsAPut(t *testing.T) {
	system := putQuietSystem(t)
	store := objstore.NewStore(1 << 10)
	var creates atomic.Int32
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			creates.Add(1)
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(), RequestId: m.GetRequestId()})
		}
	}))
	log := logrus.New()
	log.SetOutput(io.Discard)
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store,
		ShardFor: func(string) *actor.PID { return shard }, Log: logrus.NewEntry(log)}))
	ask := func(m *messages.StoreReduced) *messages.StoreReducedReply {
		t.Helper()
		res, err := system.Root.RequestFuture(node, m, 10*time.Second).Result()
		if err != nil {
			t.Fatalf("%v: %v", m, err)
		}
		return res.(*messages.StoreReducedReply)
	}
	for name, m := range map[string]*messages.StoreReduced{
		"empty target":       {ReduceId: "r", TargetId: "", Data: []byte("12345678")},
		"target too long":    {ReduceId: "r", TargetId: strings.Repeat("t", 4097), Data: []byte("12345678")},
		"internal target":    {ReduceId: "r", TargetId: "\x00reduce/r/0/1", Data: []byte("12345678")},
		"no reduce id":       {TargetId: "t", Data: []byte("12345678")},
		"larger than a node": {ReduceId: "r", TargetId: "t", Data: make([]byte, 2<<10)},
	} {
		r := ask(m)
		if code := r.GetError().GetCode(); code != messages.ErrorCode_INVALID_ARGUMENT && code != messages.ErrorCode_CAPACITY {
			t.Errorf("%s: answered %v, want INVALID_ARGUMENT or CAPACITY", name, r)
		}
	}
	if n, objects := creates.Load(), len(store.Objects()); n != 0 || objects != 0 {
		t.Fatalf("the refused StoreReduceds made %d copies and %d registrations", objects, n)
	}
	if r := ask(&messages.StoreReduced{ReduceId: "r", TargetId: "t", Data: []byte("12345678"), TimeoutMs: 5000}); r.GetError() != nil {
		t.Fatalf("a good StoreReduced: %v", r)
	}
}
