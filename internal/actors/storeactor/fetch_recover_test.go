package storeactor

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// chunkOpener is a data plane whose every stream yields data.
type chunkOpener struct {
	transport.Transport
	data []byte
}

func (o *chunkOpener) Open(context.Context, string, string, string, int64, int) (transport.Stream, error) {
	return &chunks{left: [][]byte{bytes.Clone(o.data)}}, nil
}

// A fetch streams another member's bytes on a goroutine of its own: a
// panic there fails that stream with INTERNAL, counted, instead of ending
// the member, and the fetch goes on as after any failed sender (here the
// shard then answers with the bytes inline).
func TestFetchStreamPanicFailsTheStreamNotTheMember(t *testing.T) {
	data := []byte("sixteen bytes!!!")
	loc := &scriptedLocator{answer: func(_ context.Context, call int, l *messages.Locate) (*messages.LocateReply, error) {
		if call == 1 {
			return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: int64(len(data)),
				Sender:      &messages.NodeRef{NodeId: "peer", Address: "elsewhere:1", ActorId: "peer/store", DataAddress: "peer:data"},
				SenderState: messages.LocationState_COMPLETE}, nil
		}
		return inlineReply(l, data), nil
	}}
	system := putQuietSystem(t)
	log := logrus.New()
	log.SetOutput(io.Discard)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	var panicked atomic.Bool
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: objstore.NewStore(1 << 20), ShardFor: func(string) *actor.PID { return shard },
		Locate: loc.locate, Transport: &chunkOpener{data: data}, Log: logrus.NewEntry(log)}
	cfg.Hooks.BeforeFetchChunk = func(string, string, int64) {
		if panicked.CompareAndSwap(false, true) {
			panic("a bug a peer's stream reached (test)")
		}
	}
	node := system.Root.Spawn(NewProps(cfg))
	before := RecoveredPanics()
	got, err := scriptedGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get after the panicking stream: %q, %v; want %q", got, err, data)
	}
	if n := RecoveredPanics() - before; n != 1 || !panicked.Load() {
		t.Fatalf("%d panics counted (hook ran: %v), want 1", n, panicked.Load())
	}
}
