package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

func TestRoundTripSizes(t *testing.T) {
	l := start(t, Config{Nodes: 3, ChunkSize: 256 << 10})
	ctx := deadline(t, 30*time.Second)
	for i, n := range []int{0, 1, 64<<10 - 1, 64 << 10, 64<<10 + 1, 10<<20 + 3} {
		id := fmt.Sprintf("size-%d", n)
		data := randomBytes(uint64(i), n)
		if err := l.Client(0).Put(ctx, id, data); err != nil {
			t.Fatalf("put %d: %v", n, err)
		}
		for _, node := range []int{0, 1, 2} {
			got, err := l.Client(node).Get(ctx, id)
			if err != nil {
				t.Fatalf("get %d on node %d: %v", n, node, err)
			}
			if !bytes.Equal(got, data) || got == nil {
				t.Fatalf("size %d on node %d: bytes differ (got %d bytes)", n, node, len(got))
			}
		}
		ro, err := l.Client(1).GetReadOnly(ctx, id)
		if err != nil || !bytes.Equal(ro, data) {
			t.Fatalf("read-only get %d: %v", n, err)
		}
		info, err := l.Client(2).Info(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		// Small objects come back inline: no transfer is ever recorded.
		if inline := n < 64<<10; info.GetHasInline() != inline || inline != (len(info.GetTransfers()) == 0) {
			t.Fatalf("size %d: inline=%v transfers=%d", n, info.GetHasInline(), len(info.GetTransfers()))
		}
	}
}

func TestGetCopiesButReadOnlyShares(t *testing.T) {
	l := start(t, Config{Nodes: 2})
	ctx := deadline(t, 10*time.Second)
	data := randomBytes(1, 1<<20)
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	a, _ := l.Client(1).Get(ctx, "x")
	a[0] ^= 0xff // the caller's copy is its own
	b, err := l.Client(1).Get(ctx, "x")
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("modifying a Get result changed the store: %v", err)
	}
	// The Put's buffer is copied too: changing it after Put changes nothing.
	data2 := randomBytes(2, 1<<20)
	orig := bytes.Clone(data2)
	if err := l.Client(0).Put(ctx, "y", data2); err != nil {
		t.Fatal(err)
	}
	data2[0] ^= 0xff
	if got, _ := l.Client(1).Get(ctx, "y"); !bytes.Equal(got, orig) {
		t.Fatal("modifying the Put buffer after Put changed the object")
	}
}

// An inline object lives in its directory shard too: when that shard is
// on the Put's own member, in the same process, it must keep a copy of
// the bytes, not the caller's buffer, which the caller may reuse once
// Put returns.
func TestInlinePutKeepsNoReferenceToTheCallersBuffer(t *testing.T) {
	l := start(t, Config{Nodes: 2, Shards: 8})
	ctx := deadline(t, 10*time.Second)
	m1 := l.Member(1)
	var id string
	for i := 0; id == ""; i++ {
		if i > 10000 {
			t.Fatal("no id with its shard on node 0")
		}
		if c := fmt.Sprintf("inline-%d", i); m1.ShardOwner(c) == l.Member(0).ID() {
			id = c
		}
	}
	data := randomBytes(3, 1<<10)
	orig := bytes.Clone(data)
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	data[0] ^= 0xff
	for _, node := range []int{1, 0} {
		if got, err := l.Client(node).Get(ctx, id); err != nil || !bytes.Equal(got, orig) {
			t.Fatalf("node %d: modifying the Put buffer after Put changed the object (%v)", node, err)
		}
	}
}

func TestGetBeforePutCompletesPipelines(t *testing.T) {
	const chunk = 64 << 10
	located := make(chan struct{})
	var once sync.Once
	var l *Local
	cfg := Config{Nodes: 2, ChunkSize: chunk, hooks: testhooks.Set{Store: hooksForPipelining(&once, located)}}
	l = start(t, cfg)
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(3, 40*chunk+5)

	// Get first: it waits for the object to exist.
	got := make(chan []byte, 1)
	errc := make(chan error, 1)
	go func() {
		b, err := l.Client(1).Get(ctx, "p")
		got <- b
		errc <- err
	}()
	putDone := make(chan error, 1)
	go func() { putDone <- l.Client(0).Put(ctx, "p", data) }()

	// The Put is held after its first chunk until node-1 is fetching from
	// the partial creator copy.
	eventually(t, 10*time.Second, "node-1 to fetch from the partial creator", func() bool {
		info, err := l.Client(0).Info(ctx, "p", false)
		return err == nil && senderOf(info)["node-1"] == "node-0"
	})
	select {
	case err := <-putDone:
		t.Fatalf("Put finished before the receiver started (%v): no pipelining tested", err)
	default:
	}
	close(located)
	if err := <-putDone; err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("pipelined Get returned wrong bytes: %v", <-errc)
	}
}

// hooksForPipelining holds node-0's Put of "p" after its first chunk until
// located is closed.
func hooksForPipelining(once *sync.Once, located chan struct{}) (h storeactor.Hooks) {
	h.BeforePutChunk = func(node, id string, off int64) {
		if id == "p" && off > 0 {
			<-located
		}
	}
	return h
}

func TestSecondReceiverFetchesFromFirstReceiversPartialCopy(t *testing.T) {
	const chunk = 64 << 10
	release := make(chan struct{})
	cfg := Config{Nodes: 3, ChunkSize: chunk}
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-1" && off == 2*chunk {
			<-release // node-1 holds two chunks, then waits
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 20*time.Second)
	data := randomBytes(4, 30*chunk+1)
	if err := l.Client(0).Put(ctx, "b", data); err != nil {
		t.Fatal(err)
	}
	r1 := make(chan error, 1)
	go func() {
		b, err := l.Client(1).Get(ctx, "b")
		if err == nil && !bytes.Equal(b, data) {
			err = errors.New("node-1 got wrong bytes")
		}
		r1 <- err
	}()
	eventually(t, 10*time.Second, "node-1 fetching", func() bool {
		info, err := l.Client(0).Info(ctx, "b", false)
		return err == nil && senderOf(info)["node-1"] == "node-0"
	})
	r2 := make(chan error, 1)
	go func() {
		b, err := l.Client(2).Get(ctx, "b")
		if err == nil && !bytes.Equal(b, data) {
			err = errors.New("node-2 got wrong bytes")
		}
		r2 <- err
	}()
	// node-0 is busy serving node-1, so node-2 must get node-1's partial copy.
	eventually(t, 10*time.Second, "node-2 fetching", func() bool {
		info, err := l.Client(0).Info(ctx, "b", false)
		return err == nil && senderOf(info)["node-2"] != ""
	})
	info, _ := l.Client(0).Info(ctx, "b", false)
	if s := senderOf(info)["node-2"]; s != "node-1" {
		t.Fatalf("node-2 fetches from %s, want node-1's partial copy", s)
	}
	close(release)
	if err := <-r1; err != nil {
		t.Fatal(err)
	}
	if err := <-r2; err != nil {
		t.Fatal(err)
	}
}

func TestBroadcastFormsATree(t *testing.T) {
	for _, receivers := range []int{8, 15} {
		t.Run(fmt.Sprint(receivers), func(t *testing.T) {
			l := start(t, Config{Nodes: receivers + 1, ChunkSize: 128 << 10})
			ctx := deadline(t, 30*time.Second)
			data := randomBytes(5, 4<<20+7)
			if err := l.Client(0).Put(ctx, "bc", data); err != nil {
				t.Fatal(err)
			}
			getOnEvery(t, ctx, l, "bc", data, receivers)
			info := settledInfo(t, ctx, l.Client(0), "bc")
			checkBroadcastTree(t, info, "node-0", receivers)
			// A star would have node-0 send to everyone; a tree spreads it.
			fromCreator := 0
			for _, s := range senderOf(info) {
				if s == "node-0" {
					fromCreator++
				}
			}
			if fromCreator == receivers {
				t.Fatalf("every receiver fetched from the creator: %v", senderOf(info))
			}
		})
	}
}

func TestNaiveBaselineFetchesEverythingFromCreator(t *testing.T) {
	l := start(t, Config{exp: experiments.Set{Naive: true}, Nodes: 5, ChunkSize: 128 << 10})
	ctx := deadline(t, 30*time.Second)
	data := randomBytes(6, 2<<20)
	if err := l.Client(0).Put(ctx, "n", data); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 1; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if b, err := l.Client(i).Get(ctx, "n"); err != nil || !bytes.Equal(b, data) {
				t.Errorf("node-%d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	info, _ := l.Client(0).Info(ctx, "n", false)
	for r, s := range senderOf(info) {
		if s != "node-0" {
			t.Fatalf("naive %s fetched from %s", r, s)
		}
	}
}

func TestBadInput(t *testing.T) {
	l := start(t, Config{Nodes: 2, Capacity: 8 << 20})
	ctx := deadline(t, 30*time.Second)
	c0, c1 := l.Client(0), l.Client(1)
	long := strings.Repeat("x", 1025)
	for name, err := range map[string]error{
		"put empty id":    c0.Put(ctx, "", []byte("a")),
		"put long id":     c0.Put(ctx, long, []byte("a")),
		"get empty id":    second(c0.Get(ctx, "")),
		"get long id":     second(c0.Get(ctx, long)),
		"delete empty id": c0.Delete(ctx, ""),
		// NUL-prefixed ids are reserved for Reduce intermediates.
		"put NUL id":    c0.Put(ctx, "\x00reduce/x/0", []byte("a")),
		"get NUL id":    second(c1.Get(ctx, "\x00reduce/x/0")),
		"delete NUL id": c1.Delete(ctx, "\x00reduce/x/0"),
		"info NUL id":   second(c1.Info(ctx, "\x00x", false)),
	} {
		if !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%s: want INVALID_ARGUMENT, got %v", name, err)
		}
	}

	// Same bytes again: idempotent, on the same node and on another node.
	data := randomBytes(7, 200<<10)
	for _, c := range []int{0, 0, 1} {
		if err := l.Client(c).Put(ctx, "dup", data); err != nil {
			t.Fatalf("idempotent put on node %d: %v", c, err)
		}
	}
	other := bytes.Clone(data)
	other[100] ^= 1
	for _, c := range []int{0, 1} {
		if err := l.Client(c).Put(ctx, "dup", other); !errors.Is(err, messages.ErrConflict) {
			t.Fatalf("conflicting put on node %d: want CONFLICT, got %v", c, err)
		}
	}
	if got, _ := c1.Get(ctx, "dup"); !bytes.Equal(got, data) {
		t.Fatal("a conflicting Put changed the object")
	}
	small := []byte("small")
	if err := c0.Put(ctx, "dup-small", small); err != nil {
		t.Fatal(err)
	}
	if err := c1.Put(ctx, "dup-small", []byte("SMALL")); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("conflicting small put: %v", err)
	}

	// A Get of an id that never appears times out at its deadline.
	short, cancel := contextWithTimeout(ctx, 150*time.Millisecond)
	_, err := c1.Get(short, "never")
	cancel()
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("get of a missing object: want TIMEOUT, got %v", err)
	}

	// After Delete: Get and Put fail with DELETED.
	if err := c0.Delete(ctx, "dup"); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Get(ctx, "dup"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("get after delete: want DELETED, got %v", err)
	}
	if err := c0.Put(ctx, "dup", data); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("put after delete: want DELETED, got %v", err)
	}
	if err := c0.Delete(ctx, "never-existed"); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("delete of unknown: want NOT_FOUND, got %v", err)
	}

	// Larger than the node capacity.
	if err := c0.Put(ctx, "huge", make([]byte, 9<<20)); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("oversized put: want CAPACITY, got %v", err)
	}

	// A huge timeout_ms waits (as milliseconds it used to overflow into a
	// deadline in the past: the request timed out at once).
	for i, ms := range []int64{1 << 62, math.MaxInt64} {
		id := fmt.Sprintf("huge-timeout-%d", i)
		parked := make(chan any, 2)
		go func() { parked <- ask(l, 1, &messages.Get{ObjectId: id, TimeoutMs: ms}) }()
		go func() { parked <- ask(l, 1, &messages.QueryObject{ObjectId: id, Wait: true, TimeoutMs: ms}) }()
		data := randomBytes(uint64(30+i), 100<<10)
		if r, ok := ask(l, 0, &messages.Put{ObjectId: id, Data: data, TimeoutMs: ms}).(*messages.PutReply); !ok || r.GetError() != nil {
			t.Fatalf("put with timeout_ms %d: %v", ms, r)
		}
		if r, ok := ask(l, 0, &messages.Get{ObjectId: id, TimeoutMs: ms}).(*messages.GetReply); !ok || r.GetError() != nil || !bytes.Equal(r.GetData(), data) {
			t.Fatalf("get of an existing object with timeout_ms %d: %v", ms, r.GetError())
		}
		for range 2 {
			switch r := (<-parked).(type) {
			case *messages.GetReply:
				if r.GetError() != nil || !bytes.Equal(r.GetData(), data) {
					t.Fatalf("get parked with timeout_ms %d: %v", ms, r.GetError())
				}
			case *messages.ObjectInfo:
				if r.GetError() != nil || r.GetSize() != int64(len(data)) {
					t.Fatalf("query parked with timeout_ms %d: %v", ms, r.GetError())
				}
			default:
				t.Fatalf("parked request with timeout_ms %d: %v", ms, r)
			}
		}
		if r, ok := ask(l, 1, &messages.Delete{ObjectId: id, TimeoutMs: ms}).(*messages.DeleteReply); !ok || r.GetError() != nil {
			t.Fatalf("delete with timeout_ms %d: %v", ms, r)
		}
	}
}

// ask sends an application message to node i's store node and returns
// its reply, or the error of a request that got none.
func ask(l *Local, i int, msg any) any {
	res, err := l.System().Root.RequestFuture(l.StoreNode(i), msg, 20*time.Second).Result()
	if err != nil {
		return err
	}
	return res
}

func second[T any](_ T, err error) error { return err }

func TestUnknownMessagesAreDroppedAndActorsKeepRunning(t *testing.T) {
	logs := &lockedBuffer{}
	log := quietLog()
	log.SetOutput(logs)
	l := start(t, Config{Nodes: 2, Log: log})
	ctx := deadline(t, 10*time.Second)
	sup := l.Member(1).node.Load()
	// A protobuf message no actor expects, a plain Go value (sent from
	// the actor's own system: it cannot cross remote), and a reply type
	// sent as if it were a request.
	for _, pid := range []*actor.PID{l.StoreNode(0), l.Shard(0), l.Shard(1), sup} {
		sendIn(l, pid, &messages.ObjectInfo{ObjectId: "junk"})
		sendIn(l, pid, "not a message")
		sendIn(l, pid, &messages.PutReply{})
	}
	data := randomBytes(8, 100<<10)
	if err := l.Client(0).Put(ctx, "after-junk", data); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Client(1).Get(ctx, "after-junk"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after junk: %v", err)
	}
	if _, err := l.Member(1).System().Root.RequestFuture(sup, ready{}, 5*time.Second).Result(); err != nil {
		t.Fatalf("the node supervisor stopped answering: %v", err)
	}
	eventually(t, 5*time.Second, "12 logged drops", func() bool {
		return strings.Count(logs.String(), "dropped") >= 12 &&
			strings.Count(logs.String(), "node supervisor dropped an unknown message") == 3
	})
}

func TestDeleteRemovesEveryCopy(t *testing.T) {
	l := start(t, Config{Nodes: 4})
	ctx := deadline(t, 10*time.Second)
	data := randomBytes(9, 3<<20)
	if err := l.Client(0).Put(ctx, "d", data); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 3; i++ {
		if _, err := l.Client(i).Get(ctx, "d"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Client(3).Delete(ctx, "d"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "every copy freed", func() bool {
		for i := 0; i < 4; i++ {
			if l.Store(i).Lookup("d") != nil {
				return false
			}
		}
		return true
	})
	for i := 0; i < 4; i++ {
		if u := l.Store(i).Used(); u != 0 {
			t.Fatalf("node-%d still uses %d bytes", i, u)
		}
	}
	if _, err := l.Client(0).Info(ctx, "d", false); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("info after delete: %v", err)
	}
}

func TestEvictionUnpublishesAndPinnedCopiesStay(t *testing.T) {
	const mib = 1 << 20
	l := start(t, Config{Nodes: 2, Capacity: 3 * mib})
	ctx := deadline(t, 10*time.Second)
	objs := map[string][]byte{}
	for i := range 3 {
		id := fmt.Sprintf("e%d", i)
		objs[id] = randomBytes(uint64(10+i), mib)
		if err := l.Client(0).Put(ctx, id, objs[id]); err != nil {
			t.Fatal(err)
		}
	}
	// The creator's copies are pinned: a fourth does not fit on node-0.
	if err := l.Client(0).Put(ctx, "e3", randomBytes(13, mib)); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("want CAPACITY on a full creator, got %v", err)
	}
	if err := l.Client(1).Put(ctx, "e3", randomBytes(13, mib)); err != nil {
		t.Fatal(err)
	}
	objs["e3"] = randomBytes(13, mib)
	// node-1 holds e3 pinned; fetching e0, e1, e2 leaves room for two:
	// the least recently used fetched copy (e0) goes.
	for _, id := range []string{"e0", "e1", "e2"} {
		if got, err := l.Client(1).Get(ctx, id); err != nil || !bytes.Equal(got, objs[id]) {
			t.Fatalf("get %s: %v", id, err)
		}
	}
	if l.Store(1).Lookup("e0") != nil || l.Store(1).Lookup("e3") == nil {
		t.Fatal("want e0 evicted and pinned e3 kept on node-1")
	}
	eventually(t, 5*time.Second, "e0's evicted copy unpublished", func() bool {
		info, err := l.Client(0).Info(ctx, "e0", false)
		if err != nil {
			return false
		}
		for _, loc := range info.GetLocations() {
			if loc.GetNode().GetNodeId() == "node-1" {
				return false
			}
		}
		return true
	})
	// An evicted object is fetched again on demand.
	if got, err := l.Client(1).Get(ctx, "e0"); err != nil || !bytes.Equal(got, objs["e0"]) {
		t.Fatalf("re-get e0: %v", err)
	}
}

func TestApplicationActorUsesMessages(t *testing.T) {
	l := start(t, Config{Nodes: 2})
	done := make(chan string, 1)
	data := randomBytes(14, 300<<10)
	deleted := false
	// The application actor puts on node-0 and gets on node-1 through
	// plain message requests, as any Proto.Actor application would.
	props := actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *actor.Started:
			ctx.Request(l.StoreNode(0), &messages.Put{ObjectId: "app", Data: data, TimeoutMs: 5000})
		case *messages.PutReply:
			if m.GetError() != nil {
				done <- "put: " + m.GetError().Error()
				return
			}
			ctx.Request(l.StoreNode(1), &messages.Get{ObjectId: "app", TimeoutMs: 5000})
		case *messages.GetReply:
			if deleted {
				if errors.Is(m.GetError(), messages.ErrDeleted) {
					done <- "ok"
				} else {
					done <- fmt.Sprintf("get after delete: %v", m.GetError())
				}
				return
			}
			if m.GetError() != nil || !bytes.Equal(m.GetData(), data) {
				done <- fmt.Sprintf("get: %v", m.GetError())
				return
			}
			ctx.Request(l.StoreNode(1), &messages.Delete{ObjectId: "app", TimeoutMs: 5000})
		case *messages.DeleteReply:
			if m.GetError() != nil {
				done <- "delete: " + m.GetError().Error()
				return
			}
			deleted = true
			ctx.Request(l.StoreNode(0), &messages.Get{ObjectId: "app", TimeoutMs: 5000})
		}
	})
	l.System().Root.Spawn(props)
	select {
	case r := <-done:
		if r != "ok" {
			t.Fatal(r)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("application actor got no replies")
	}
}

func TestGetBeforePutOnTheSameNode(t *testing.T) {
	// A Get that starts locating before the Put on the same node must not
	// wait for itself: the Put fills the Get's placeholder.
	l := start(t, Config{Nodes: 2, ChunkSize: 64 << 10})
	ctx := deadline(t, 10*time.Second)
	for i, size := range []int{1 << 20, 100} { // a transfer-sized and an inline object
		id := fmt.Sprintf("self-%d", i)
		data := randomBytes(uint64(40+i), size)
		got := make(chan error, 2)
		for _, node := range []int{0, 1} {
			go func() {
				b, err := l.Client(node).Get(ctx, id)
				if err == nil && !bytes.Equal(b, data) {
					err = fmt.Errorf("node-%d: wrong bytes", node)
				}
				got <- err
			}()
		}
		eventually(t, 5*time.Second, "the Get to park its placeholder", func() bool { return l.Store(0).Lookup(id) != nil })
		if err := l.Client(0).Put(ctx, id, data); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := <-got; err != nil {
				t.Fatal(err)
			}
		}
		if o := l.Store(0).Lookup(id); o == nil || !o.Pinned() {
			t.Fatalf("%s: node-0 does not hold the pinned creator copy", id)
		}
	}
}

func TestPutRightAfterStartKeepsItsOnlyCopy(t *testing.T) {
	// The shards' startup republication races the first Puts: a Put must
	// never take its own republished copy for someone else's and drop it.
	for round := range 10 {
		l := start(t, Config{Nodes: 3, ChunkSize: 64 << 10})
		ctx := deadline(t, 10*time.Second)
		data := randomBytes(uint64(300+round), 1<<20)
		if err := l.Client(0).Put(ctx, "early", data); err != nil {
			t.Fatal(err)
		}
		if got, err := l.Client(2).Get(ctx, "early"); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round %d: %v", round, err)
		}
		l.Stop()
	}
}

// A Get of an object that does not fit next to the reader's pinned copies
// fails with CAPACITY, keeps what the reader holds, and frees the sender
// the directory had assigned: the next receiver is served by it.
func TestGetLargerThanFreeCapacityFailsAndFreesTheSender(t *testing.T) {
	const mib = 1 << 20
	l := start(t, Config{Nodes: 3, Capacity: 8 * mib})
	ctx := deadline(t, 30*time.Second)
	pinned, big := randomBytes(50, 5*mib), randomBytes(51, 5*mib)
	if err := l.Client(1).Put(ctx, "pinned", pinned); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(0).Put(ctx, "big", big); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Client(1).Get(ctx, "big"); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("Get of 5 MiB next to a pinned 5 MiB in 8 MiB: %v, want CAPACITY", err)
	}
	if o := l.Store(1).Lookup("big"); o != nil {
		t.Fatal("the failed Get left a copy on the reader")
	}
	if u := l.Store(1).Used(); u != 5*mib {
		t.Fatalf("reader uses %d bytes, want its pinned 5 MiB", u)
	}
	if got, err := l.Client(1).Get(ctx, "pinned"); err != nil || !bytes.Equal(got, pinned) {
		t.Fatalf("the reader's pinned object: %v", err)
	}
	eventually(t, 5*time.Second, "the sender freed and the reader gone from the directory", func() bool {
		info, err := l.Client(0).Info(ctx, "big", false)
		if err != nil || len(info.GetLocations()) != 1 {
			return false
		}
		loc := info.GetLocations()[0]
		return loc.GetNode().GetNodeId() == "node-0" && !loc.GetServing()
	})
	// A sender still marked busy would never be offered: this Get would
	// wait for its deadline.
	short, cancel := contextWithTimeout(ctx, 10*time.Second)
	got, err := l.Client(2).Get(short, "big")
	cancel()
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("next receiver: %v", err)
	}
	info, err := l.Client(0).Info(ctx, "big", false)
	if err != nil {
		t.Fatal(err)
	}
	if s := senderOf(info)["node-2"]; s != "node-0" {
		t.Fatalf("node-2 fetched from %q, want node-0", s)
	}
}

// getOnEvery Gets id on nodes 1 to receivers of l at once and fails the
// test unless every one returns data.
func getOnEvery(t *testing.T, ctx context.Context, l *Local, id string, data []byte, receivers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, receivers)
	for i := 1; i <= receivers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, err := l.Client(i).Get(ctx, id)
			if err == nil && !bytes.Equal(b, data) {
				err = fmt.Errorf("node-%d: wrong bytes", i)
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}
