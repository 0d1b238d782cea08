package fetchrun

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// committedTarget returns a shard's table where Reduce run committed
// target "t" (1 KiB, reducing s1 and s0) on its root's node "root".
func committedTarget(t *testing.T, run string) *directory.LocationTable {
	t.Helper()
	tb := directory.NewLocationTable(directory.TableConfig{})
	if _, err := tb.Reserve("t", run); err != nil {
		t.Fatal(err)
	}
	root := sender("root")
	tb.Create(&messages.CreateObject{ObjectId: "t", Size: 1024, Creator: root, ReduceId: run, ReduceGeneration: 1}, "c")
	tb.Publish(&messages.PublishLocation{ObjectId: "t", Node: root, State: messages.LocationState_COMPLETE, Size: 1024,
		Fingerprint: 5, Creator: true, ReduceId: run, ProducedBy: run, ReducedIds: []string{"s1", "s0"}})
	return tb
}

// readCopy fetches "t" onto node "me" through table tb, as a Get there
// does, and returns the completed copy.
func readCopy(t *testing.T, tb *directory.LocationTable) *storenode.Object {
	t.Helper()
	store := storenode.NewStore(1 << 30)
	obj, _ := store.Reserve("t")
	now := time.Unix(1000, 0)
	me := &messages.NodeRef{NodeId: "me", ActorId: "me/store"}
	f := NewFetch(storeproto.FetchConfig{Self: me, Grace: time.Second, Rand: rand.New(rand.NewPCG(1, 2))}, store, obj, now.Add(time.Minute), nil)
	var loc *messages.Locate
	for _, s := range f.Start(now).Sends {
		if l, ok := s.Msg.(*messages.Locate); ok {
			loc = l
		}
	}
	if loc == nil {
		t.Fatal("the fetch sent no Locate")
	}
	var reply *messages.LocateReply
	for _, s := range tb.Locate(loc, "reader", now).Sends {
		if r, ok := s.Msg.(*messages.LocateReply); ok && s.To == "reader" {
			reply = r
		}
	}
	if reply == nil || reply.GetError() != nil {
		t.Fatalf("the shard's answer: %v", reply)
	}
	out := f.Located(reply, now)
	if out.Stream == nil {
		t.Fatalf("no stream started: %+v", out)
	}
	if err := f.Writer().Append(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	if out := f.StreamEnded(out.Stream.ID, nil, now.Add(time.Millisecond)); !out.Done || out.Err != nil {
		t.Fatalf("the stream's end: %+v", out)
	}
	return obj
}

// A reader's copy of a committed Reduce target records the run that
// committed it and its sources, as the shard answered its Locate, and
// republishes them. When the root's member and the coordinator's (the
// shard's home) both die after the commit, before the caller heard the
// answer, the readers' copies are all that is left: a rebuilt shard
// learns from them that the call's next attempt has its result, and
// answers it with the committed sources instead of CONFLICT (chaos soak
// seed 5000364).
func TestReadersCopyOfACommittedTargetRepublishesItsRun(t *testing.T) {
	run := directory.ReduceID("t", "call1", "a1")
	obj := readCopy(t, committedTarget(t, run))
	if p, _ := obj.Producer(); p != run {
		t.Fatalf("the reader's copy names run %q, want %q", p, run)
	}
	pub, ok := obj.Publication(&messages.NodeRef{NodeId: "me", ActorId: "me/store"})
	if !ok || pub.GetProducedBy() != run || !slices.Equal(pub.GetReducedIds(), []string{"s1", "s0"}) || pub.GetReduceId() != "" {
		t.Fatalf("the reader's republication: %v", pub)
	}
	rebuilt := directory.NewLocationTable(directory.TableConfig{})
	rebuilt.Publish(pub)
	got, err := rebuilt.Reserve("t", directory.ReduceID("t", "call1", "a2"))
	if err != nil || !slices.Equal(got, []string{"s1", "s0"}) {
		t.Fatalf("the call's next attempt at the rebuilt shard: %v, %v; want the committed [s1 s0]", got, err)
	}
	if _, err := rebuilt.Reserve("t", directory.ReduceID("t", "call2", "b1")); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("another call's Reduce into it: %v, want CONFLICT", err)
	}
}

// A copy that names a run already keeps it: a reader's record never
// replaces the root's or an AllReduce participant's.
func TestAReadersRunDoesNotReplaceACopysOwn(t *testing.T) {
	o := storenode.NewStore(1 << 20)
	obj, _ := o.Reserve("t")
	obj.SetProducer("red#own", 2)
	markRun(obj, &storeproto.StoreOp{Kind: storeproto.OpComplete, Run: "red#other", Reduced: []string{"s9"}})
	if p, g := obj.Producer(); p != "red#own" || g != 2 {
		t.Fatalf("the copy's run became %q generation %d", p, g)
	}
}

// A reader answered before the commit streams from the root, whose last
// byte waits for the commit; its answer named no run. Its FetchDone,
// after the commit, gets the run from the shard (a ReduceCommit that
// only marks the copy), and its node records it; one whose answer named
// the run gets nothing more.
func TestReaderBeforeTheCommitIsToldTheRun(t *testing.T) {
	run := directory.ReduceID("t", "call1", "a1")
	tb := directory.NewLocationTable(directory.TableConfig{})
	if _, err := tb.Reserve("t", run); err != nil {
		t.Fatal(err)
	}
	root := sender("root")
	tb.Create(&messages.CreateObject{ObjectId: "t", Size: 1024, Creator: root, ReduceId: run, ReduceGeneration: 1}, "c")
	me := &messages.NodeRef{NodeId: "me", ActorId: "me/store"}
	var reply *messages.LocateReply
	for _, s := range tb.Locate(&messages.Locate{ObjectId: "t", Receiver: me, TimeoutMs: 1000, Attempt: 3}, "reader", time.Unix(1000, 0)).Sends {
		if r, ok := s.Msg.(*messages.LocateReply); ok {
			reply = r
		}
	}
	if reply == nil || reply.GetSender().GetNodeId() != "root" || reply.GetProducedBy() != "" {
		t.Fatalf("the reader's answer before the commit: %v", reply)
	}
	tb.Publish(&messages.PublishLocation{ObjectId: "t", Node: root, State: messages.LocationState_COMPLETE, Size: 1024,
		Fingerprint: 5, Creator: true, ReduceId: run, ProducedBy: run, ReducedIds: []string{"s1", "s0"}})
	out := tb.FetchDone(&messages.FetchDone{ObjectId: "t", Receiver: me, Sender: root, Size: 1024, Fingerprint: 5, Epoch: reply.GetEpoch()})
	var mark *messages.ReduceCommit
	for _, s := range out.Sends {
		if m, ok := s.Msg.(*messages.ReduceCommit); ok && s.To == me {
			mark = m
		}
	}
	if mark == nil || !mark.GetMarkOnly() || mark.GetReduceId() != run || !slices.Equal(mark.GetReducedIds(), []string{"s1", "s0"}) {
		t.Fatalf("the reader's FetchDone after the commit: %v; want a mark naming the run", out.Sends)
	}
	out = tb.FetchDone(&messages.FetchDone{ObjectId: "t", Receiver: me, Sender: root, Size: 1024, Fingerprint: 5, Epoch: reply.GetEpoch(), Run: run})
	for _, s := range out.Sends {
		if _, ok := s.Msg.(*messages.ReduceCommit); ok {
			t.Fatalf("a copy that recorded the run is marked again: %v", out.Sends)
		}
	}
}

// A reader streaming a Reduce's target before its commit, when the
// target's shard (and with it the coordinator) dies: its partial copy is
// republished naming the run, and the rebuilt shard, where no run holds
// the id, drops it (RESET, so the reader's Get asks again) instead of
// recording it. Once every node has republished, the target is not LOST:
// the Reduce's next attempt will make it, and a Get waits for that
// (chaos seed 5000897 answered LOST).
func TestRebuiltShardDropsAReadersCopyOfADeadRunsTarget(t *testing.T) {
	run := directory.ReduceID("t", "call1", "a1")
	tb := directory.NewLocationTable(directory.TableConfig{})
	if _, err := tb.Reserve("t", run); err != nil {
		t.Fatal(err)
	}
	root := sender("root")
	tb.Create(&messages.CreateObject{ObjectId: "t", Size: 1024, Creator: root, ReduceId: run, ReduceGeneration: 1}, "c")

	store := storenode.NewStore(1 << 30)
	obj, _ := store.Reserve("t")
	now := time.Unix(1000, 0)
	me := &messages.NodeRef{NodeId: "me", ActorId: "me/store"}
	f := NewFetch(storeproto.FetchConfig{Self: me, Grace: time.Second, Rand: rand.New(rand.NewPCG(1, 2))}, store, obj, now.Add(time.Minute), nil)
	var loc *messages.Locate
	for _, s := range f.Start(now).Sends {
		if l, ok := s.Msg.(*messages.Locate); ok {
			loc = l
		}
	}
	var reply *messages.LocateReply
	for _, s := range tb.Locate(loc, "reader", now).Sends {
		if r, ok := s.Msg.(*messages.LocateReply); ok {
			reply = r
		}
	}
	if reply.GetReduceId() != run {
		t.Fatalf("the answer before the commit: %v; want it to name the running Reduce", reply)
	}
	if out := f.Located(reply, now); out.Stream == nil {
		t.Fatalf("no stream: %+v", out)
	}
	if err := f.Writer().Append(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	pub, ok := obj.Publication(me)
	if !ok || pub.GetState() != messages.LocationState_PARTIAL || pub.GetReduceId() != run || pub.GetCreator() {
		t.Fatalf("the reader's partial republication: %v", pub)
	}

	rebuilt := directory.NewLocationTable(directory.TableConfig{})
	out := rebuilt.Publish(pub).Sends
	if len(out) != 1 {
		t.Fatalf("the rebuilt shard's answer to the partial copy: %v; want one drop", out)
	}
	if d, ok := out[0].Msg.(*messages.DropObject); !ok || out[0].To != me || !errors.Is(d.GetReason(), messages.ErrReset) || d.GetReduceId() != "" {
		t.Fatalf("the rebuilt shard's answer to the partial copy: %v; want a RESET drop to the reader", out)
	}
	for _, s := range rebuilt.Republished().Sends {
		t.Fatalf("once every node republished: %v; want nothing lost", s)
	}
	got := rebuilt.Locate(&messages.Locate{ObjectId: "t", Receiver: me, TimeoutMs: 1000, Attempt: 9}, "again", now).Sends
	if len(got) != 0 {
		t.Fatalf("the reader's next Locate: %v; want it to wait for the target", got)
	}
}
