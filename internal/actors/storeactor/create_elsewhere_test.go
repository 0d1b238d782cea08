package storeactor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// elsewhereNode is a store node whose every shard is on another member
// (a PID at another address) and whose Creator is create.
func elsewhereNode(t *testing.T, create Creator) (*actor.ActorSystem, *actor.PID, *objstore.Store) {
	return elsewhereNodeDeleting(t, create, nil)
}

// elsewhereNodeDeleting is elsewhereNode with the Deleter del.
func elsewhereNodeDeleting(t *testing.T, create Creator, del Deleter) (*actor.ActorSystem, *actor.PID, *objstore.Store) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	shard := actor.NewPID("127.0.0.2:1", "node-1/shard-0") // another member's
	log, _ := logtest.NewNullLogger()
	store := objstore.NewStore(1 << 20)
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
		Store: store, ShardFor: func(string) *actor.PID { return shard }, Create: create, Delete: del, Transport: transport.NewMemory(0), Log: logrus.NewEntry(log)}))
	syncNode(t, system, node)
	return system, node, store
}

func putMessage(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string, data []byte) *messages.Error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Put{ObjectId: id, Data: data, TimeoutMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	r, ok := res.(*messages.PutReply)
	if !ok {
		t.Fatalf("Put answered %T", res)
	}
	return r.GetError()
}

// A Put sent to the node (an actor's, a Dial client's) of an inline
// object whose shard is on another member registers through the node's
// Creator (the data plane), not as an actor request across the actors'
// remote; a failed call fails the Put as a stopped shard does, and
// leaves no copy.
func TestNodePutRegistersElsewhereThroughTheCreator(t *testing.T) {
	var mu sync.Mutex
	var asked []*messages.CreateObject
	fail := false
	system, node, store := elsewhereNode(t, func(ctx context.Context, shard *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		if _, ok := ctx.Deadline(); !ok || shard.GetId() != "node-1/shard-0" {
			t.Errorf("the Creator was asked without a deadline or of %v", shard)
		}
		if fail {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the shard's member went")
		}
		return &messages.CreateObjectReply{ObjectId: c.GetObjectId(), RequestId: c.GetRequestId(), RecordedComplete: c.GetComplete()}, nil
	})
	if e := putMessage(t, system, node, "a", []byte("small bytes")); e != nil {
		t.Fatalf("Put: %v", e)
	}
	if o := store.Lookup("a"); o == nil || !o.IsWhole() {
		t.Fatal("no whole creator copy after the Put")
	}
	// A streamed object's registration is an actor request, as ever:
	// to a member that is not there, it fails.
	big := make([]byte, 200<<10)
	if e := putMessage(t, system, node, "b", big); !errors.Is(messages.ErrOrNil(e), messages.ErrUnavailable) {
		t.Fatalf("Put of %d bytes to a shard nobody runs: %v, want UNAVAILABLE", len(big), e)
	}
	mu.Lock()
	if len(asked) != 1 || asked[0].GetObjectId() != "a" || !asked[0].GetHasInline() {
		t.Fatalf("the Creator was asked %v, want a's inline registration alone", asked)
	}
	fail = true
	mu.Unlock()
	e := putMessage(t, system, node, "c", []byte("more bytes"))
	if !errors.Is(messages.ErrOrNil(e), messages.ErrUnavailable) {
		t.Fatalf("Put whose Creator failed: %v, want UNAVAILABLE", e)
	}
	if store.Lookup("c") != nil {
		t.Error("a Put whose registration failed left its copy")
	}
}
