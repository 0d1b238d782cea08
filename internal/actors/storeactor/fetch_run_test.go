package storeactor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// scriptedLocator answers each Locate with answer, on the caller's
// goroutine, and counts them.
type scriptedLocator struct {
	answer func(ctx context.Context, call int, l *messages.Locate) (*messages.LocateReply, error)

	mu    sync.Mutex
	calls int
}

func (s *scriptedLocator) locate(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	return s.answer(ctx, call, l)
}

func (s *scriptedLocator) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// inlineReply answers l with the object's bytes.
func inlineReply(l *messages.Locate, data []byte) *messages.LocateReply {
	return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: int64(len(data)),
		HasInline: true, InlineData: data}
}

// openCounter is a data plane that counts the streams opened and opens
// none.
type openCounter struct {
	transport.Transport
	opens atomic.Int32
}

func (o *openCounter) Open(context.Context, string, string, string, int64, int) (transport.Stream, error) {
	o.opens.Add(1)
	return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no streams in this test")
}

// scripted is a store node whose Locates go to a scriptedLocator.
type scripted struct {
	system *actor.ActorSystem
	node   *actor.PID
	store  *objstore.Store
	// shard is what its ShardFor names: a running actor that records
	// the types of what it hears (heard): the Locates go to the
	// locator, and what else the node tells the directory to it.
	shard atomic.Pointer[actor.PID]
	mu    sync.Mutex
	heard []string
	// received are the types of the messages the node received.
	received func() []string
}

// scriptedNode starts a store node whose Locates go to loc, and whose
// streams are opened on dp.
func scriptedNode(t *testing.T, loc *scriptedLocator, dp transport.Transport) *scripted {
	t.Helper()
	system := putQuietSystem(t)
	sn := &scripted{system: system, store: objstore.NewStore(1 << 20)}
	sn.shard.Store(system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(actor.SystemMessage); !ok {
			sn.mu.Lock()
			sn.heard = append(sn.heard, fmt.Sprintf("%T", ctx.Message()))
			sn.mu.Unlock()
		}
	})))
	log := logrus.New()
	log.SetOutput(io.Discard)
	var (
		mu   sync.Mutex
		seen []string
	)
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: sn.store, ShardFor: func(string) *actor.PID { return sn.shard.Load() },
		Locate: loc.locate, Transport: dp, Log: logrus.NewEntry(log),
		Hooks: Hooks{BeforeReceive: func(_ string, m any) {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%T", m))
			mu.Unlock()
		}}}
	received := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
	sn.received = received
	sn.node = system.Root.Spawn(NewProps(cfg))
	return sn
}

func scriptedGet(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Get{ObjectId: id, TimeoutMs: 5000})
	if err != nil {
		t.Fatalf("Get %s: no answer: %v", id, err)
	}
	r := res.(*messages.GetReply)
	return r.GetData(), messages.ErrOrNil(r.GetError())
}

// fetchMessages are the store node's messages of its fetches.
func fetchMessages(received []string) []string {
	var out []string
	for _, m := range received {
		if m == "*storeactor.fetchLocated" || m == "*storeactor.fetchTimerFired" || m == "*storeactor.fetchStreamEnded" {
			out = append(out, m)
		}
	}
	return out
}

// An inline object is fetched by the store node itself: one Locate,
// whose end is one message to the node, and the store keeps a complete
// copy.
func TestInlineGetIsOneLocateAndOneAnswer(t *testing.T) {
	data := []byte("small object")
	loc := &scriptedLocator{answer: func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		return inlineReply(l, data), nil
	}}
	sn := scriptedNode(t, loc, nil)
	system, node, store, received := sn.system, sn.node, sn.store, sn.received
	got, err := scriptedGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if n := loc.count(); n != 1 {
		t.Errorf("%d Locates; want 1", n)
	}
	if got := fetchMessages(received()); !slices.Equal(got, []string{"*storeactor.fetchLocated"}) {
		t.Errorf("the fetch took %v; want one fetchLocated", got)
	}
	o := store.Lookup("x")
	if o == nil {
		t.Fatal("the store keeps no copy")
	}
	if _, done, err := o.Progress(); !done || err != nil {
		t.Fatalf("the copy is not complete: done %v, err %v", done, err)
	}
}

// A shard that answers UNAVAILABLE (it is restarting or moving) is asked
// again after the fetch's backoff.
func TestFetchRetriesAfterUnavailable(t *testing.T) {
	data := []byte("second time")
	loc := &scriptedLocator{answer: func(_ context.Context, call int, l *messages.Locate) (*messages.LocateReply, error) {
		if call == 1 {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "shard restarting")
		}
		return inlineReply(l, data), nil
	}}
	sn := scriptedNode(t, loc, nil)
	system, node, received := sn.system, sn.node, sn.received
	got, err := scriptedGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if n := loc.count(); n != 2 {
		t.Errorf("%d Locates; want 2", n)
	}
	if got := fetchMessages(received()); !slices.Equal(got, []string{"*storeactor.fetchLocated", "*storeactor.fetchTimerFired", "*storeactor.fetchLocated"}) {
		t.Errorf("the fetch took %v; want an answer, the backoff's timer, an answer", got)
	}
}

// A shard's final error (here DELETED) ends the Get with that error, and
// leaves no copy.
func TestFetchErrorEndsTheGet(t *testing.T) {
	loc := &scriptedLocator{answer: func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(),
			Error: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", l.GetObjectId())}, nil
	}}
	sn := scriptedNode(t, loc, nil)
	system, node, store := sn.system, sn.node, sn.store
	_, err := scriptedGet(t, system, node, "x")
	if !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get: %v; want DELETED", err)
	}
	if store.Lookup("x") != nil {
		t.Error("the store keeps a copy of a deleted object")
	}
}

// The shard's DropObject may overtake its answer to the Locate (they
// travel different ways): the drop ends the fetch, and the late answer,
// which names a sender, starts no stream of the dropped copy. The shard
// hears one FetchAborted, naming the dropped fetch's attempt, which frees
// the sender it claimed for that attempt and nothing a later fetch of the
// node claims (directory.TestFetchAbortedOfAnAttemptFreesOnlyItsClaim).
func TestDropOvertakingTheAnswerEndsTheFetch(t *testing.T) {
	release := make(chan struct{})
	loc := &scriptedLocator{answer: func(ctx context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return nil, messages.AsError(ctx.Err())
		}
		return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: 1 << 20, SenderState: messages.LocationState_COMPLETE,
			Sender: &messages.NodeRef{NodeId: "s", Address: "nonhost", ActorId: "s/store", DataAddress: "mem://s"}}, nil
	}}
	dp := &openCounter{}
	sn := scriptedNode(t, loc, dp)
	system, node, store, received := sn.system, sn.node, sn.store, sn.received
	got := make(chan error, 1)
	go func() {
		_, err := scriptedGet(t, system, node, "x")
		got <- err
	}()
	waitFor(t, "the Locate", func() bool { return loc.count() == 1 })
	system.Root.Send(node, &messages.DropObject{ObjectId: "x", Reason: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", "x")})
	waitFor(t, "the drop", func() bool { return slices.Contains(received(), "*messages.DropObject") })
	close(release)
	if err := <-got; !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get: %v; want DELETED", err)
	}
	waitFor(t, "the late answer", func() bool { return slices.Contains(received(), "*storeactor.fetchLocated") })
	// The node takes its messages in order: a Get after the answer is
	// answered after the answer was handled.
	loc.answer = func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		return inlineReply(l, []byte("y")), nil
	}
	if _, err := scriptedGet(t, system, node, "y"); err != nil {
		t.Fatal(err)
	}
	if n := dp.opens.Load(); n != 0 {
		t.Fatalf("%d streams opened after the copy was dropped", n)
	}
	// The shard (an actor of its own) records what it hears on its own
	// goroutine: the node sent the FetchAborted while it handled the late
	// answer, but the shard may not have taken it yet.
	waitFor(t, "the shard to hear of the dropped copy", func() bool {
		sn.mu.Lock()
		defer sn.mu.Unlock()
		return len(sn.heard) > 0
	})
	sn.mu.Lock()
	defer sn.mu.Unlock()
	if !slices.Equal(sn.heard, []string{"*messages.FetchAborted"}) {
		t.Fatalf("the shard heard %v about the dropped copy, want one FetchAborted", sn.heard)
	}
	if o := store.Lookup("x"); o != nil {
		t.Fatalf("the store holds the dropped object again")
	}
}

// A shard that stops while the node's Locate waits at it fails that
// Locate at once (the node watches it), and the fetch asks again.
func TestShardStopFailsItsLocate(t *testing.T) {
	data := []byte("after the move")
	loc := &scriptedLocator{answer: func(ctx context.Context, call int, l *messages.Locate) (*messages.LocateReply, error) {
		if call == 1 {
			<-ctx.Done() // the shard stopped with this Locate in its mailbox
			return nil, messages.AsError(ctx.Err())
		}
		return inlineReply(l, data), nil
	}}
	sn := scriptedNode(t, loc, nil)
	system, node, received := sn.system, sn.node, sn.received
	go func() {
		waitFor(t, "the Locate", func() bool { return loc.count() == 1 })
		// It moves: the table names its new home first.
		old := sn.shard.Swap(system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})))
		system.Root.Stop(old)
	}()
	got, err := scriptedGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if n := loc.count(); n != 2 {
		t.Errorf("%d Locates; want 2", n)
	}
	if !slices.Contains(received(), "*actor.Terminated") {
		t.Errorf("the node did not hear of the shard's end: %v", received())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: timed out", what)
		}
		time.Sleep(time.Millisecond)
	}
}
