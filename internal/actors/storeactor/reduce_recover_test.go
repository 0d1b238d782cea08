package storeactor

import (
	"io"
	"testing"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
)

// A reduce task runs on a goroutine of its own, handling what other
// processes sent (the task, its inputs' streams): a panic there fails its
// position with INTERNAL, reported to the coordinator, and is counted,
// instead of ending the member. The node still runs the next task.
func TestReduceTaskPanicFailsThePositionNotTheMember(t *testing.T) {
	system := putQuietSystem(t)
	store := objstore.NewStore(1 << 20)
	for _, id := range []string{"s0", "s1"} {
		o, _, err := store.Create(id, 64, 0)
		if err != nil {
			t.Fatal(err)
		}
		wr := o.NewWriter()
		buf, err := wr.Tail()
		if err != nil {
			t.Fatal(err)
		}
		if err := wr.Advance(len(buf)); err != nil {
			t.Fatal(err)
		}
		if err := store.Complete(o); err != nil {
			t.Fatal(err)
		}
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(log)}
	cfg.Hooks.BeforeReduceChunk = func(_, id string, _ int64) {
		if id == "s0" {
			panic("a bug a peer's task reached (test)")
		}
	}
	node := system.Root.Spawn(NewProps(cfg))
	reports := make(chan any, 64)
	coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.ReduceTaskStarted, *messages.ReduceTaskDone:
			reports <- m
		}
	}))
	before := RecoveredPanics()
	system.Root.RequestWithCustomSender(node, leafTask("r#1", 0, "s0", 64), coord)
	_, done := reportsOf(t, reports, 1, 1)
	if err := done[0].GetError(); err.GetCode() != messages.ErrorCode_INTERNAL {
		t.Fatalf("the panicking position ended with %v, want INTERNAL", err)
	}
	if n := RecoveredPanics() - before; n != 1 {
		t.Fatalf("%d panics counted, want 1", n)
	}
	system.Root.RequestWithCustomSender(node, leafTask("r#2", 0, "s1", 64), coord)
	_, done = reportsOf(t, reports, 1, 1)
	if err := messages.ErrOrNil(done[0].GetError()); err != nil {
		t.Fatalf("the next task after the panic: %v", err)
	}
}
