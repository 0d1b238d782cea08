package storeactor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/fetchrun"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// fakeShard answers Locate: the first time (no failed sender) with a
// sender whose data endpoint does not exist, then always UNAVAILABLE, as a
// shard that keeps restarting would.
type fakeShard struct {
	locates, afterFailure *atomic.Int32
}

func (s *fakeShard) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*messages.Locate)
	if !ok {
		return
	}
	s.locates.Add(1)
	if m.GetFailedSender() == nil {
		ctx.Respond(&messages.LocateReply{ObjectId: m.GetObjectId(), Attempt: m.GetAttempt(), Size: 128 << 10, SenderState: messages.LocationState_COMPLETE,
			Sender: &messages.NodeRef{NodeId: "gone", Address: ctx.Self().GetAddress(), ActorId: "gone/store", DataAddress: "mem://gone"}})
		return
	}
	s.afterFailure.Add(1)
	ctx.Respond(&messages.LocateReply{ObjectId: m.GetObjectId(), Attempt: m.GetAttempt(), Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "shard restarting")})
}

type fetchFixture struct {
	system *actor.ActorSystem
	obj    *objstore.Object
	fake   *fakeShard
}

// startFetch runs a store node's fetch of object "x" against fakeShard,
// for a Get whose deadline is getDeadline from now.
func startFetch(t *testing.T, getDeadline, stall time.Duration) *fetchFixture {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	log, _ := logtest.NewNullLogger()
	f := &fetchFixture{system: system, fake: &fakeShard{locates: new(atomic.Int32), afterFailure: new(atomic.Int32)}}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f.fake }))
	store := objstore.NewStore(1 << 20)
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
		Store: store, ShardFor: func(string) *actor.PID { return shard }, Transport: transport.NewMemory(0),
		ChunkSize: 32 << 10, StallTimeout: stall, Log: logrus.NewEntry(log)}))
	system.Root.Send(node, &messages.Get{ObjectId: "x", TimeoutMs: getDeadline.Milliseconds()})
	for end := time.Now().Add(10 * time.Second); f.obj == nil; f.obj = store.Lookup("x") {
		if time.Now().After(end) {
			t.Fatal("the Get reserved no object")
		}
		time.Sleep(time.Millisecond)
	}
	return f
}

// waitEnded waits for the fetch to end; the limit is far beyond the
// Gets' deadline plus the stall timeout, which bound it.
func (f *fetchFixture) waitEnded(t *testing.T) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, _, err := f.obj.Progress(); err != nil {
			// Which of the two ends the last attempt depends on where the
			// grace runs out: between attempts, or during the last Locate.
			if !errors.Is(err, messages.ErrUnavailable) && !errors.Is(err, messages.ErrTimeout) {
				t.Fatalf("the abandoned copy's error is %v, want UNAVAILABLE or TIMEOUT", err)
			}
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the fetch still runs (%d Locates, %d after the sender failed): a shard answering UNAVAILABLE keeps it going forever",
				f.fake.locates.Load(), f.fake.afterFailure.Load())
		}
	}
}

// TestFetchGivesUpAfterSenderFailureWhenShardStaysUnavailable: after its
// sender failed, a fetch keeps locating for a grace of one stall timeout
// past the Gets' deadline, but no longer: a shard that keeps answering
// UNAVAILABLE must not keep it alive forever.
func TestFetchGivesUpAfterSenderFailureWhenShardStaysUnavailable(t *testing.T) {
	f := startFetch(t, 50*time.Millisecond, 100*time.Millisecond)
	f.waitEnded(t)
	if f.fake.afterFailure.Load() == 0 {
		t.Fatal("the fetch never located again after its sender failed")
	}
}

// A fetch superseded while it located an inline object (its store
// node restarted, and the restarted node's session stored the object
// first) neither wipes the newer copy nor fails it for the Gets that wait
// on it: chaos seed 51 saw those Gets fail CANCELED "writer superseded".
func TestSupersededInlineFetchLeavesTheNewerCopy(t *testing.T) {
	store := objstore.NewStore(1 << 20)
	fc := storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "n"}, Grace: time.Second}
	obj, _ := store.Reserve("x")
	data := []byte("the object's bytes")
	now := time.Unix(1000, 0)
	loc := &messages.LocateReply{ObjectId: "x", Size: int64(len(data)), HasInline: true, InlineData: data, Attempt: 1}

	old := fetchrun.NewFetch(fc, store, obj, now.Add(time.Minute), nil)
	old.Start(now) // the session before the restart
	newer := fetchrun.NewFetch(fc, store, obj, now.Add(time.Minute), nil)
	newer.Start(now) // the restarted node's session

	// The newer session allocates first but has not written yet when
	// the old one's Locate reply is handled.
	if _, err := store.Allocate(obj, int64(len(data)), 0); err != nil {
		t.Fatal(err)
	}
	used := store.Used()
	if out := old.Located(loc, now); !out.Done || !errors.Is(out.Err, messages.ErrCanceled) || len(out.Sends) != 0 {
		t.Fatalf("the superseded session: done %v, %v, sends %v; want CANCELED and nothing sent", out.Done, out.Err, out.Sends)
	}
	if _, _, err := obj.Progress(); err != nil {
		t.Fatalf("the superseded session failed the object: %v", err)
	}
	if store.Used() != used {
		t.Fatalf("store use went from %d to %d: allocated twice", used, store.Used())
	}
	if out := newer.Located(loc, now); !out.Done || out.Err != nil {
		t.Fatalf("the newer session: done %v, %v", out.Done, out.Err)
	}
	b, err := obj.Bytes()
	if err != nil || string(b) != string(data) {
		t.Fatalf("the newer session's copy: %q, %v", b, err)
	}
	if store.Used() != int64(len(data)) {
		t.Fatalf("store use %d after one %d-byte object", store.Used(), len(data))
	}
	// A late, duplicated reply to the old session changes nothing either.
	if out := old.Located(loc, now); out.Done || len(out.Sends) != 0 {
		t.Fatalf("the superseded session after completion acted: %+v", out)
	}
	if b, err := obj.Bytes(); err != nil || string(b) != string(data) {
		t.Fatalf("after the old session's second try: %q, %v", b, err)
	}
}

// watchCountingShard is a directory shard as a bare Process that counts
// the Watch and Unwatch system messages it gets.
type watchCountingShard struct {
	watches, unwatches atomic.Int32
}

func (s *watchCountingShard) SendUserMessage(*actor.PID, any) {}

func (s *watchCountingShard) SendSystemMessage(_ *actor.PID, message any) {
	switch message.(type) {
	case *actor.Watch:
		s.watches.Add(1)
	case *actor.Unwatch:
		s.unwatches.Add(1)
	}
}

func (s *watchCountingShard) Stop(*actor.PID) {}

// watchCountingNode is a store node whose every object's shard is a
// watchCountingShard on its own member, or with remote on another's, and whose Locates locate answers beside the shard, which
// sees only the store node's watches (an actor request would watch it
// itself).
func watchCountingNode(t *testing.T, remote bool, locate Locator) (*actor.ActorSystem, *actor.PID, *watchCountingShard) {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	shard := &watchCountingShard{}
	pid, ok := system.ProcessRegistry.Add(shard, "counting-shard")
	if !ok {
		t.Fatal("shard process not registered")
	}
	if remote {
		pid = actor.NewPID("far:1", pid.GetId())
		system.ProcessRegistry.RegisterAddressResolver(func(p *actor.PID) (actor.Process, bool) {
			return shard, p.GetAddress() == "far:1"
		})
	}
	log, _ := logtest.NewNullLogger()
	node := system.Root.Spawn(NewProps(Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
		Store: objstore.NewStore(1 << 20), ShardFor: func(string) *actor.PID { return pid }, Locate: locate, Transport: transport.NewMemory(0), Log: logrus.NewEntry(log)}))
	return system, node, shard
}

func inlineAnswer(l *messages.Locate) *messages.LocateReply {
	data := []byte("inline bytes")
	return &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: int64(len(data)), HasInline: true, InlineData: data}
}

func getInline(t *testing.T, system *actor.ActorSystem, node *actor.PID, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Get{ObjectId: id, TimeoutMs: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if r := res.(*messages.GetReply); r.GetError() != nil || string(r.GetData()) != "inline bytes" {
		t.Fatalf("Get %s: %q, %v", id, r.GetData(), r.GetError())
	}
}

// A store node watches each shard it asks once, however many Gets it
// fetches through it, and a Locate answered quickly waits for no watch:
// a watched actor keeps its watchers until it stops, so a watch per Get
// would grow a long-lived shard's set for good, and a watch and an
// unwatch per Get would be two more messages across the network each.
func TestStoreNodeWatchesEachShardOnce(t *testing.T) {
	system, node, shard := watchCountingNode(t, false, func(_ context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		return inlineAnswer(l), nil
	})
	for i := range 5 {
		getInline(t, system, node, fmt.Sprintf("x%d", i))
	}
	if w, u := shard.watches.Load(), shard.unwatches.Load(); w != 1 || u != 0 {
		t.Fatalf("the shard got %d watches and %d unwatches for 5 Gets, want 1 and 0", w, u)
	}
}

// A shard on another member is watched only when a Locate to it is late
// (actorutil.RemoteWatchDelay): answered in time, a new cluster's Gets pay no watch
// across the network on their path; a late one is watched, once.
func TestRemoteShardIsWatchedOnlyWhenALocateIsLate(t *testing.T) {
	defer actorutil.SetRemoteWatchDelay(50 * time.Millisecond)()
	var late atomic.Bool
	var shard *watchCountingShard
	system, node, shard := watchCountingNode(t, true, func(ctx context.Context, _ *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if late.Load() {
			// Answered only once the node watched the shard.
			for shard.watches.Load() == 0 {
				select {
				case <-ctx.Done():
					return nil, messages.AsError(ctx.Err())
				case <-time.After(time.Millisecond):
				}
			}
		}
		return inlineAnswer(l), nil
	})
	for i := range 3 {
		getInline(t, system, node, fmt.Sprintf("quick%d", i))
	}
	if w := shard.watches.Load(); w != 0 {
		t.Fatalf("the remote shard got %d watches for 3 Locates answered at once, want 0", w)
	}
	late.Store(true)
	getInline(t, system, node, "late")
	late.Store(false)
	getInline(t, system, node, "after")
	if w, u := shard.watches.Load(), shard.unwatches.Load(); w != 1 || u != 0 {
		t.Fatalf("the remote shard got %d watches and %d unwatches, want 1 and 0 (watched when late, once)", w, u)
	}
}
