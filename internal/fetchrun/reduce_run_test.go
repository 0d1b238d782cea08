package fetchrun

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// reservedTarget returns a shard's table where Reduce run holds target
// "t" (1 KiB) and its root on node "root" created it.
func reservedTarget(t *testing.T, run string) *directory.LocationTable {
	t.Helper()
	tb := directory.NewLocationTable(directory.TableConfig{})
	if _, err := tb.Reserve("t", run); err != nil {
		t.Fatal(err)
	}
	tb.Step(time.Time{}, directory.Create{Req: &messages.CreateObject{ObjectId: "t", Size: 1024, Creator: sender("root"), ReduceId: run, ReduceGeneration: 1}, ReplyTo: "c"})
	return tb
}

// commit is the coordinator's commit of run's root result, reducing s1
// and s0.
func commit(tb *directory.LocationTable, run string) {
	tb.Step(time.Time{}, &messages.PublishLocation{ObjectId: "t", Node: sender("root"), State: messages.LocationState_COMPLETE, Size: 1024,
		Fingerprint: 5, Creator: true, ReduceId: run, ProducedBy: run, ReducedIds: []string{"s1", "s0"}})
}

// committedTarget returns a shard's table where Reduce run committed
// target "t" on its root's node "root".
func committedTarget(t *testing.T, run string) *directory.LocationTable {
	tb := reservedTarget(t, run)
	commit(tb, run)
	return tb
}

// reader is node "me" fetching "t" as a Get there does, through a
// shard's table.
type reader struct {
	f     *Fetch
	obj   *objstore.Object
	reply *messages.LocateReply // the shard's answer
	out   storeproto.FetchOutput
}

var me = &messages.NodeRef{NodeId: "me", ActorId: "me/store"}

// startReading starts the fetch, has tb answer its Locate and starts the
// stream from the sender it names.
func startReading(t *testing.T, tb *directory.LocationTable) *reader {
	t.Helper()
	store := objstore.NewStore(1 << 30)
	obj, _ := store.Reserve("t")
	now := time.Unix(1000, 0)
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
	r := &reader{f: f, obj: obj}
	for _, s := range tb.Step(now, directory.Locate{Req: loc, ReplyTo: "reader"}).Sends {
		if lr, ok := s.Msg.(*messages.LocateReply); ok && s.To == "reader" {
			r.reply = lr
		}
	}
	if r.reply == nil || r.reply.GetError() != nil {
		t.Fatalf("the shard's answer: %v", r.reply)
	}
	if r.out = f.Located(r.reply, now); r.out.Stream == nil {
		t.Fatalf("no stream started: %+v", r.out)
	}
	return r
}

// readCopy fetches "t" onto node "me" through table tb and returns the
// completed copy.
func readCopy(t *testing.T, tb *directory.LocationTable) *objstore.Object {
	t.Helper()
	r := startReading(t, tb)
	if err := r.f.Writer().Append(make([]byte, 1024)); err != nil {
		t.Fatal(err)
	}
	if out := r.f.StreamEnded(r.out.Stream.ID, nil, time.Unix(1000, 0).Add(time.Millisecond)); !out.Done || out.Err != nil {
		t.Fatalf("the stream's end: %+v", out)
	}
	return r.obj
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
	pub, ok := obj.Publication(me)
	if !ok || pub.GetProducedBy() != run || !slices.Equal(pub.GetReducedIds(), []string{"s1", "s0"}) || pub.GetReduceId() != "" {
		t.Fatalf("the reader's republication: %v", pub)
	}
	rebuilt := directory.NewLocationTable(directory.TableConfig{})
	rebuilt.Step(time.Time{}, pub)
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
	o := objstore.NewStore(1 << 20)
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
	tb := reservedTarget(t, run)
	r := startReading(t, tb)
	if r.reply.GetSender().GetNodeId() != "root" || r.reply.GetProducedBy() != "" {
		t.Fatalf("the reader's answer before the commit: %v", r.reply)
	}
	commit(tb, run)
	done := &messages.FetchDone{ObjectId: "t", Receiver: me, Sender: sender("root"), Size: 1024, Fingerprint: 5, Epoch: r.reply.GetEpoch()}
	var mark *messages.ReduceCommit
	out := tb.Step(time.Time{}, done)
	for _, s := range out.Sends {
		if m, ok := s.Msg.(*messages.ReduceCommit); ok && s.To == me {
			mark = m
		}
	}
	if mark == nil || !mark.GetMarkOnly() || mark.GetReduceId() != run || !slices.Equal(mark.GetReducedIds(), []string{"s1", "s0"}) {
		t.Fatalf("the reader's FetchDone after the commit: %v; want a mark naming the run", out.Sends)
	}
	done.Run = run
	for _, s := range tb.Step(time.Time{}, done).Sends {
		if _, ok := s.Msg.(*messages.ReduceCommit); ok {
			t.Fatalf("a copy that recorded the run is marked again: %v", s)
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
	r := startReading(t, reservedTarget(t, run))
	if r.reply.GetReduceId() != run {
		t.Fatalf("the answer before the commit: %v; want it to name the running Reduce", r.reply)
	}
	if err := r.f.Writer().Append(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	pub, ok := r.obj.Publication(me)
	if !ok || pub.GetState() != messages.LocationState_PARTIAL || pub.GetReduceId() != run || pub.GetCreator() {
		t.Fatalf("the reader's partial republication: %v", pub)
	}

	rebuilt := directory.NewLocationTable(directory.TableConfig{})
	out := rebuilt.Step(time.Time{}, pub).Sends
	if len(out) != 1 {
		t.Fatalf("the rebuilt shard's answer to the partial copy: %v; want one drop", out)
	}
	if d, ok := out[0].Msg.(*messages.DropObject); !ok || out[0].To != me || !errors.Is(d.GetReason(), messages.ErrReset) || d.GetReduceId() != "" {
		t.Fatalf("the rebuilt shard's answer to the partial copy: %v; want a RESET drop to the reader", out)
	}
	for _, s := range rebuilt.Step(time.Time{}, directory.Republished{}).Sends {
		t.Fatalf("once every node republished: %v; want nothing lost", s)
	}
	got := rebuilt.Step(time.Unix(1000, 0), directory.Locate{Req: &messages.Locate{ObjectId: "t", Receiver: me, TimeoutMs: 1000, Attempt: 9}, ReplyTo: "again"}).Sends
	if len(got) != 0 {
		t.Fatalf("the reader's next Locate: %v; want it to wait for the target", got)
	}
}
