package storeactor

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// chunkRecorder is a data plane that records the chunk each Open asks
// for and refuses it.
type chunkRecorder struct {
	transport.Transport
	chunks chan int
}

func (r *chunkRecorder) Open(_ context.Context, _, _, _ string, _ int64, chunk int) (transport.Stream, error) {
	r.chunks <- chunk
	return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "not here")
}

// A PutFrom's bytes are streamed in the largest chunks whatever the node
// measured: nobody reads the object before its last byte, and a node
// that has measured no bandwidth yet (a creator that never fetched from
// a peer) cut its streams into 256 KiB frames, a read each.
func TestPutFromStreamsInTheLargestChunks(t *testing.T) {
	system := putQuietSystem(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	rec := &chunkRecorder{Transport: transport.NewMemory(0), chunks: make(chan int, 2)}
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: objstore.NewStore(1 << 30), Transport: rec,
		Estimator: estimator.New(time.Millisecond, 0), Log: logrus.NewEntry(log)}
	node := system.Root.Spawn(NewProps(cfg))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []*messages.PutFrom{
		{ObjectId: "known", Size: 64 << 20, DataAddress: "client", TimeoutMs: 5000},
		{ObjectId: "stream", Size: -1, SegmentSize: storeproto.StreamSegment, DataAddress: "client", TimeoutMs: 5000},
	} {
		res, err := actorutil.Request(ctx, system.Root, node, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := res.(*messages.PutReply).GetError().Err(); err == nil {
			t.Fatalf("%s: put succeeded with no bytes", m.GetObjectId())
		}
		if got := <-rec.chunks; got != plan.MaxChunk {
			t.Fatalf("%s: the stream asked for chunks of %d bytes, want %d", m.GetObjectId(), got, plan.MaxChunk)
		}
	}
}
