package storenode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// scriptedLocates is a data plane that carries only control requests:
// each ControlLocate is answered by answer, on the caller's goroutine.
type scriptedLocates struct {
	transport.Transport // nil: no object streams in these tests
	answer              func(ctx context.Context, call int, l *messages.Locate) (*messages.LocateReply, error)

	mu    sync.Mutex
	calls int
}

func (s *scriptedLocates) Call(ctx context.Context, _ string, kind byte, req []byte) ([]byte, error) {
	if kind != messages.ControlLocate {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "unexpected control request %q", kind)
	}
	l := &messages.Locate{}
	if err := proto.Unmarshal(req, l); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.calls++
	call := s.calls
	s.mu.Unlock()
	r, err := s.answer(ctx, call, l)
	if err != nil {
		return nil, err
	}
	return proto.Marshal(r)
}

func (s *scriptedLocates) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// inlineReply answers l with the object's bytes.
func inlineReply(l *messages.Locate, data []byte) *messages.LocateReply {
	return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: int64(len(data)),
		HasInline: true, InlineData: data}
}

// lightNode starts a store node whose Locates go on the data plane dp,
// as to a shard on another member, and records the types of the messages it
// receives.
func lightNode(t *testing.T, dp *scriptedLocates) (*actor.ActorSystem, *actor.PID, *storenode.Store, func() []string) {
	t.Helper()
	system := putQuietSystem(t)
	// A running shard (a session watches it), which hears nothing: the
	// Locates go on dp.
	shard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	store := storenode.NewStore(1 << 20)
	log := logrus.New()
	log.SetOutput(io.Discard)
	var (
		mu   sync.Mutex
		seen []string
	)
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Transport: dp, LocateAt: func(*actor.PID) string { return "shard-data" }, Log: logrus.NewEntry(log),
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
	return system, system.Root.Spawn(NewProps(cfg)), store, received
}

func lightGet(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string) ([]byte, error) {
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

// An inline object whose Locate goes on the data plane is fetched by the
// store node itself: one Locate, no fetch session, and the store keeps a
// complete copy.
func TestInlineGetOnTheDataPlaneNeedsNoSession(t *testing.T) {
	data := []byte("small object")
	dp := &scriptedLocates{answer: func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		if l.GetReplyTo().GetActorId() == "" {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Locate without reply_to")
		}
		return inlineReply(l, data), nil
	}}
	system, node, store, received := lightNode(t, dp)
	got, err := lightGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if n := dp.count(); n != 1 {
		t.Errorf("%d Locates; want 1", n)
	}
	if slices.Contains(received(), "*storenode.fetchEnded") {
		t.Errorf("a fetch session ran: the store node received %v", received())
	}
	o := store.Lookup("x")
	if o == nil {
		t.Fatal("the store keeps no copy")
	}
	if _, done, err := o.Progress(); !done || err != nil {
		t.Fatalf("the copy is not complete: done %v, err %v", done, err)
	}
}

// A Locate still unanswered after watchDelay is handed to a session, which
// takes its late answer.
func TestLightFetchUnansweredIsAdoptedBySession(t *testing.T) {
	defer func(d time.Duration) { watchDelay = d }(watchDelay)
	watchDelay = time.Millisecond
	data := []byte("late")
	release := make(chan struct{})
	dp := &scriptedLocates{answer: func(ctx context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		select {
		case <-release:
			return inlineReply(l, data), nil
		case <-ctx.Done():
			return nil, messages.AsError(ctx.Err())
		}
	}}
	system, node, _, received := lightNode(t, dp)
	go func() {
		// Answer once the store node handed the fetch over.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !slices.Contains(received(), "*storenode.lightDue") {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	got, err := lightGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if !slices.Contains(received(), "*storenode.lightDue") {
		t.Fatalf("the fetch was never handed over: the store node received %v", received())
	}
	if n := dp.count(); n != 1 {
		t.Errorf("%d Locates; want 1 (the session took over the one in flight)", n)
	}
}

// A shard that answers UNAVAILABLE (it is restarting or moving) hands
// the fetch to a session, which asks again after its backoff.
func TestLightFetchRetriesInSessionAfterUnavailable(t *testing.T) {
	data := []byte("second time")
	dp := &scriptedLocates{answer: func(_ context.Context, call int, l *messages.Locate) (*messages.LocateReply, error) {
		if call == 1 {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "shard restarting")
		}
		return inlineReply(l, data), nil
	}}
	system, node, _, received := lightNode(t, dp)
	got, err := lightGet(t, system, node, "x")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("Get: %q, %v; want %q", got, err, data)
	}
	if n := dp.count(); n != 2 {
		t.Errorf("%d Locates; want 2", n)
	}
	// The session answers the Get before it stops and tells its store
	// node, so its fetchEnded may still be on its way.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && !slices.Contains(received(), "*storenode.fetchEnded") {
		time.Sleep(time.Millisecond)
	}
	if !slices.Contains(received(), "*storenode.fetchEnded") {
		t.Errorf("no session retried: the store node received %v", received())
	}
}

// A shard's final error (here DELETED) ends the Get with that error in
// the store node, and leaves no copy.
func TestLightFetchErrorEndsTheGet(t *testing.T) {
	dp := &scriptedLocates{answer: func(_ context.Context, _ int, l *messages.Locate) (*messages.LocateReply, error) {
		return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(),
			Error: messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", l.GetObjectId())}, nil
	}}
	system, node, store, received := lightNode(t, dp)
	_, err := lightGet(t, system, node, "x")
	if !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("Get: %v; want DELETED", err)
	}
	if slices.Contains(received(), "*storenode.fetchEnded") {
		t.Errorf("a fetch session ran: the store node received %v", received())
	}
	if store.Lookup("x") != nil {
		t.Error("the store keeps a copy of a deleted object")
	}
}
