package storeactor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
)

// A root whose CreateObject the shard refuses (its Reduce ended, e.g. with
// its coordinator's member, before the root registered the target) drops
// the target it promoted from a Get's placeholder with RESET, so the Get
// asks again and waits for the object like any other, rather than failing
// with the refusal meant for the run (chaos seed 20: a target Get failed
// INVALID_ARGUMENT "not reserved for reduce").
func TestRefusedRootCreateResetsTheWaitingGet(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(),
				Error: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q is not reserved for reduce %s", m.GetObjectId(), m.GetReduceId())})
		}
	}))
	store := objstore.NewStore(1 << 20)
	cfg := &Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(logrus.New())}
	placeholder, _ := store.Reserve("target") // a Get of the target waits here
	w := &reduceWorker{cfg: cfg, out: &positionOutput{}}
	task := &messages.ReduceTask{ReduceId: "r1", TargetId: "target", OutputId: "target", Root: true, Size: 64}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := w.createOutput(ctx, system, task); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("createOutput: %v, want the shard's INVALID_ARGUMENT", err)
	}
	if err := placeholder.WaitComplete(ctx); !errors.Is(err, messages.ErrReset) {
		t.Fatalf("the waiting Get sees %v, want RESET (ask again)", err)
	}
	if store.Lookup("target") != nil {
		t.Fatal("the refused target is still in the store")
	}
}

// A root that finished its target holds it back: every byte but the last
// is readable (a Get streams it as it is produced), but the target
// completes, and a Get on this node or any reader can finish, only once
// the coordinator commits that generation on its node. The chaos suite found Gets
// that returned a finished root's bytes while its coordinator, which had
// not taken that root's report yet, moved the root and answered with
// another generation's sources (seed 22 under load: "not MAX of exactly
// the reduced [s0.1 s0.0 s0.2]").
func TestRootTargetCompletesOnlyOnItsCommit(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId()})
		}
	}))
	reports := make(chan *messages.ReduceTaskDone, 4)
	coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.ReduceTaskDone); ok {
			reports <- m
		}
	}))
	store := objstore.NewStore(1 << 20)
	src, _, err := store.Create("src", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64)
	for i := range data {
		data[i] = byte(i + 1)
	}
	if err := src.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(src); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(logrus.New()), DefaultTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}
	node := system.Root.Spawn(NewProps(cfg))
	task := &messages.ReduceTask{ReduceId: "r1", TargetId: "target", OutputId: "target", Root: true, Size: 64, Generation: 1,
		SourceId: "src", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}
	system.Root.RequestWithCustomSender(node, task, coord)
	var done *messages.ReduceTaskDone
	select {
	case done = <-reports:
	case <-time.After(10 * time.Second):
		t.Fatal("the root never reported done")
	}
	if err := messages.ErrOrNil(done.GetError()); err != nil || done.GetFingerprint() != fingerprint.Of(data) {
		t.Fatalf("done: %v, fingerprint %x; want success with the target's fingerprint %x", err, done.GetFingerprint(), fingerprint.Of(data))
	}
	target := store.Lookup("target")
	if target == nil {
		t.Fatal("no target in the store")
	}
	if _, whole, _ := target.Progress(); whole {
		t.Fatal("the target is complete before its coordinator committed it: a Get returns it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if b, err := target.ReadAt(ctx, 0, 64); err != nil || len(b) != 63 {
		t.Fatalf("a reader of the uncommitted target got %d bytes (%v), want all but the last", len(b), err)
	}
	// A commit of another generation, or of another Reduce, completes
	// nothing; the coordinator's, sent to the root's node, does.
	system.Root.Send(node, &messages.ReduceCommit{ReduceId: "r1", Generation: 2, TargetId: "target"})
	system.Root.Send(node, &messages.ReduceCommit{ReduceId: "r2", Generation: 1, TargetId: "target"})
	if _, err := system.Root.RequestFuture(node, &messages.NodeStatus{}, 10*time.Second).Result(); err != nil {
		t.Fatal(err)
	}
	if _, whole, _ := target.Progress(); whole {
		t.Fatal("a commit of another generation or Reduce completed the target")
	}
	system.Root.Send(node, &messages.ReduceCommit{ReduceId: "r1", Generation: 1, TargetId: "target"})
	if err := target.WaitComplete(ctx); err != nil {
		t.Fatalf("the committed target: %v", err)
	}
	if b, err := target.Bytes(); err != nil || !bytes.Equal(b, data) {
		t.Fatalf("the committed target: %v, equal to the source %v", err, bytes.Equal(b, data))
	}
}

// A root's target that no commit completed is no result: its node drops
// it when the Reduce is released, even keeping the target, and even if
// the root's worker is gone by then (its coordinator stopped right after
// answering, and its Terminated reached the worker before the release:
// the worker keeps a target that awaits a commit, which may be on its
// way). Kept, the copy stayed pinned and held for ever, and a Get on
// that node waited on it to its deadline.
func TestReleaseDropsARootTargetNoCommitCompleted(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId()})
		}
	}))
	for _, commit := range []bool{false, true} {
		store := objstore.NewStore(1 << 20)
		src, _, err := store.Create("src", 64, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Append(make([]byte, 64)); err != nil {
			t.Fatal(err)
		}
		if err := store.Complete(src); err != nil {
			t.Fatal(err)
		}
		log := logrus.New()
		log.SetOutput(io.Discard)
		node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
			Log: logrus.NewEntry(log), DefaultTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}))
		reports := make(chan *messages.ReduceTaskDone, 1)
		coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			if m, ok := ctx.Message().(*messages.ReduceTaskDone); ok {
				reports <- m
			}
		}))
		system.Root.RequestWithCustomSender(node, &messages.ReduceTask{ReduceId: "r1", TargetId: "target", OutputId: "target", Root: true,
			Size: 64, Generation: 1, SourceId: "src", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}, coord)
		select {
		case <-reports:
		case <-time.After(10 * time.Second):
			t.Fatal("the root never reported done")
		}
		if commit {
			system.Root.Send(node, &messages.ReduceCommit{ReduceId: "r1", Generation: 1, TargetId: "target"})
		}
		if err := system.Root.StopFuture(coord).Wait(); err != nil {
			t.Fatal(err)
		}
		system.Root.Send(node, &messages.ReduceRelease{ReduceId: "r1", KeepTarget: true, TargetId: "target"})
		if _, err := system.Root.RequestFuture(node, &messages.NodeStatus{}, 10*time.Second).Result(); err != nil {
			t.Fatal(err)
		}
		o := store.Lookup("target")
		if !commit && o != nil {
			t.Fatal("the uncommitted root target is still in the store after the Reduce's release")
		}
		if commit {
			if o == nil {
				t.Fatal("the committed target went with the release that keeps it")
			}
			if _, done, err := o.Progress(); !done || err != nil {
				t.Fatalf("the committed target after the release: done %v, %v", done, err)
			}
		}
	}
}

// A Reduce started again after its coordinator's member died (a new
// Reduce id, at the target shard's new home) may put its root on the
// node where the first one's root wrote the target and kept it for a
// commit that never came: that copy is no result (nobody read it
// whole), and the new root replaces it instead of failing on it.
func TestRootReplacesAnUncommittedTargetOfAnotherReduce(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId()})
		}
	}))
	store := objstore.NewStore(1 << 20)
	src, _, err := store.Create("src", 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 64)
	data[0] = 7
	if err := src.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(src); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(log), DefaultTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}))
	run := func(reduceID string) (*actor.PID, chan any) {
		reports := make(chan any, 4)
		coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
			switch m := ctx.Message().(type) {
			case *messages.ReduceTaskStarted, *messages.ReduceTaskDone:
				reports <- m
			}
		}))
		system.Root.RequestWithCustomSender(node, &messages.ReduceTask{ReduceId: reduceID, TargetId: "target", OutputId: "target", Root: true,
			Size: 64, Generation: 1, SourceId: "src", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}, coord)
		return coord, reports
	}
	next := func(c chan any) any {
		select {
		case m := <-c:
			return m
		case <-time.After(10 * time.Second):
			t.Fatal("no report from the root")
			return nil
		}
	}
	oldCoord, oldReports := run("first")
	next(oldReports) // started
	if d, ok := next(oldReports).(*messages.ReduceTaskDone); !ok || d.GetError() != nil {
		t.Fatalf("the first Reduce's root: %v", d)
	}
	// Its coordinator's member dies: the worker keeps the held target.
	if err := system.Root.StopFuture(oldCoord).Wait(); err != nil {
		t.Fatal(err)
	}
	_, reports := run("second")
	if s, ok := next(reports).(*messages.ReduceTaskStarted); !ok || s.GetError() != nil {
		t.Fatalf("the second Reduce's root on the same node: %v, want it started", s)
	}
	if d, ok := next(reports).(*messages.ReduceTaskDone); !ok || d.GetError() != nil {
		t.Fatalf("the second Reduce's root: %v", d)
	}
	system.Root.Send(node, &messages.ReduceCommit{ReduceId: "second", Generation: 1, TargetId: "target"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := store.Lookup("target")
	if o == nil {
		t.Fatal("no target after the second root")
	}
	if err := o.WaitComplete(ctx); err != nil {
		t.Fatalf("the second Reduce's committed target: %v", err)
	}
	if rid, _ := o.Producer(); rid != "second" {
		t.Fatalf("the target is produced by %q, want the second Reduce", rid)
	}
}

// A rebuilt shard drops the uncommitted target copy of a Reduce it holds
// no reservation for (its coordinator died with the shard's old home),
// naming that run: by the time the drop arrives, the copy on the node may
// be the next attempt's, which must stay, and a committed result is never
// dropped this way.
func TestUncommittedOfNamesOnlyThatRunsHeldCopy(t *testing.T) {
	store := objstore.NewStore(1 << 20)
	held := func(id, rid string) *objstore.Object {
		o, _, err := store.Create(id, 4, 0)
		if err != nil {
			t.Fatal(err)
		}
		o.SetProducer(rid, 1)
		o.HoldTail()
		if err := o.Append([]byte("abcd")); err != nil {
			t.Fatal(err)
		}
		return o
	}
	o := held("t1", "t1#call.a1")
	if !uncommittedOf(o, "t1#call.a1") {
		t.Fatal("the run's own uncommitted copy is not dropped")
	}
	if uncommittedOf(o, "t1#call.a0") {
		t.Fatal("a drop naming the dead attempt would remove the next attempt's copy")
	}
	c := held("t2", "t2#call.a1")
	if !store.CommitTarget("t2", "t2#call.a1", 1, []string{"s"}) {
		t.Fatal("commit")
	}
	if uncommittedOf(c, "t2#call.a1") {
		t.Fatal("a committed result would be dropped")
	}
	if uncommittedOf(nil, "x") {
		t.Fatal("no copy, nothing to drop")
	}
}
