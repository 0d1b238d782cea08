package storeactor

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A Get whose copy completes and is evicted to make room before the store
// node answers it (a store full of cached copies) asks again: it used to
// answer NOT_FOUND "was evicted" for an object the directory still had.
func TestGetOfACopyEvictedBeforeItsAnswerAsksAgain(t *testing.T) {
	data := []byte("0123456789abcdef")
	size := int64(len(data))
	loc := &scriptedLocator{answer: func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		return inlineReply(l, data), nil
	}}
	system := putQuietSystem(t)
	store := objstore.NewStore(size) // room for one copy
	evicted := false
	log := logrus.New()
	log.SetOutput(io.Discard)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Locate: loc.locate, Transport: &openCounter{}, Log: logrus.NewEntry(log),
		Hooks: Hooks{BeforeReceive: func(_ string, m any) {
			if _, ok := m.(*objectSettled); !ok || evicted {
				return
			}
			// x is complete and idle: another cached copy takes its room
			// before the node answers the Get waiting on it.
			evicted = true
			y, _ := store.Reserve("y")
			if ev, err := store.Allocate(y, size, 0); err != nil || len(ev) != 1 || ev[0] != "x" {
				t.Errorf("making room evicted %v, %v; want x", ev, err)
				return
			}
			if err := y.NewWriter().Append(data); err != nil {
				t.Error(err)
			}
			if err := store.Complete(y); err != nil {
				t.Error(err)
			}
		}}}
	node := system.Root.Spawn(NewProps(cfg))
	got, err := scriptedGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get of x: %q, %v; want its bytes", got, err)
	}
	if !evicted {
		t.Fatal("x's copy was never evicted under the Get")
	}
	if n := loc.count(); n != 2 {
		t.Fatalf("%d Locates, want 2 (the second after the eviction)", n)
	}
}
