package storeactor

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// A reduce position reads its children's streams in the chunk its
// coordinator chose for the tree's depth (ReduceTask.chunk) when that is
// smaller than its own, and in its own otherwise: every hop of a deep
// chain waits for a chunk.
func TestReducePositionReadsInTheTreesChunk(t *testing.T) {
	const size = 32 << 20
	for _, tc := range []struct {
		task, want int
	}{
		{0, plan.UnmeasuredChunk},                          // no chunk chosen: the node's own
		{plan.MinChunk, plan.MinChunk},                     // a deep tree's
		{plan.MaxChunk, plan.UnmeasuredChunk},              // larger than its own: its own
		{plan.MinPipelineChunk, plan.MinPipelineChunk},     // a deep chain's on a slow link
		{plan.MinPipelineChunk / 4, plan.MinPipelineChunk}, // never under MinPipelineChunk
	} {
		system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
			return slog.New(slog.NewTextHandler(io.Discard, nil))
		}))
		store := objstore.NewStore(2 * size)
		src, _, err := store.Create("src", size, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Append(make([]byte, size)); err != nil {
			t.Fatal(err)
		}
		if err := store.Complete(src); err != nil {
			t.Fatal(err)
		}
		log := logrus.New()
		log.SetOutput(io.Discard)
		rec := &chunkRecorder{Transport: transport.NewMemory(0), chunks: make(chan int, 8)}
		cfg := Config{Self: &messages.NodeRef{NodeId: "n", DataAddress: "n-data"}, Store: store, Transport: rec,
			Estimator: estimator.New(time.Millisecond, 0), Log: logrus.NewEntry(log),
			DefaultTimeout: 5 * time.Second, StallTimeout: 5 * time.Second}
		node := system.Root.Spawn(NewProps(cfg))
		system.Root.Send(node, &messages.ReduceTask{ReduceId: "r", TargetId: "target", OutputId: "\x00reduce/r/1/1", Position: 1,
			Size: size, Generation: 1, SourceId: "src", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64, Chunk: int64(tc.task),
			Children: []*messages.ReduceInput{{Node: &messages.NodeRef{NodeId: "m", DataAddress: "m-data"}, ObjectId: "\x00reduce/r/0/1"}}})
		select {
		case got := <-rec.chunks:
			if got != tc.want {
				t.Errorf("task chunk %d: the position opened its child's stream in chunks of %d bytes, want %d", tc.task, got, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("task chunk %d: the position never opened its child's stream", tc.task)
		}
		system.Shutdown()
	}
}
