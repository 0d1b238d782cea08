package storenode

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
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
	store := storenode.NewStore(1 << 20)
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

// A root refused because an earlier generation of its Reduce finished the
// target (CreateObjectReply.sealed_generation) tells its coordinator which
// generation: that generation's result is the Reduce's (see
// coordinator's taskStarted). Without it the coordinator fails the
// Reduce, or worse, a later root's different bytes replace the copy a Get
// already returned.
func TestSealedRootRefusalNamesTheFinishedGeneration(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	shard := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId(), SealedGeneration: 2,
				Error: messages.Errorf(messages.ErrorCode_CONFLICT, "object %q: root generation 2 finished it", m.GetObjectId())})
		}
	}))
	got := make(chan *messages.ReduceTaskStarted, 1)
	coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.ReduceTaskStarted); ok {
			got <- m
		}
	}))
	store := storenode.NewStore(1 << 20)
	cfg := &Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(logrus.New()), DefaultTimeout: 5 * time.Second}
	task := &messages.ReduceTask{ReduceId: "r1", TargetId: "target", OutputId: "target", Root: true, Size: 64, Generation: 3,
		SourceId: "src", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}
	system.Root.Spawn(newReduceWorkerProps(cfg, task, coord, &positionOutput{}, time.Now()))
	select {
	case m := <-got:
		if m.GetSealedGeneration() != 2 || !errors.Is(messages.ErrOrNil(m.GetError()), messages.ErrConflict) || m.GetGeneration() != 3 {
			t.Fatalf("started: sealed %d, error %v, generation %d; want sealed 2, CONFLICT, generation 3", m.GetSealedGeneration(), m.GetError(), m.GetGeneration())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the refused root never reported to its coordinator")
	}
	if store.Lookup("target") != nil {
		t.Fatal("the refused target is still in the store")
	}
}
