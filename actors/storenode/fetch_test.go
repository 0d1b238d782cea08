package storenode

import (
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// fakeShard answers Locate: the first time (no failed sender) with a
// sender whose data endpoint does not exist, then always UNAVAILABLE, as a
// shard that keeps restarting would.
type fakeShard struct {
	locates, afterFailure *atomic.Int32
	silent                bool // never answers: the session waits in Locate
}

func (s *fakeShard) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*messages.Locate)
	if !ok {
		return
	}
	s.locates.Add(1)
	if s.silent {
		return
	}
	if m.GetFailedSender() == nil {
		ctx.Respond(&messages.LocateReply{ObjectId: m.GetObjectId(), Attempt: m.GetAttempt(), Size: 128 << 10, SenderState: messages.LocationState_COMPLETE,
			Sender: &messages.NodeRef{NodeId: "gone", Address: ctx.Self().GetAddress(), ActorId: "gone/store", DataAddress: "mem://gone"}})
		return
	}
	s.afterFailure.Add(1)
	ctx.Respond(&messages.LocateReply{ObjectId: m.GetObjectId(), Attempt: m.GetAttempt(), Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "shard restarting")})
}

// fetchParent spawns one fetch session and reports its end.
type fetchParent struct {
	props *actor.Props
	ended chan<- *actor.PID
	child chan<- *actor.PID
}

func (p *fetchParent) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.child <- ctx.Spawn(p.props)
	case *fetchEnded:
		p.ended <- m.pid
	}
}

type fetchFixture struct {
	system *actor.ActorSystem
	obj    *storenode.Object
	cfg    *Config
	fake   *fakeShard
	ended  chan *actor.PID
	child  *actor.PID
	logs   *logtest.Hook
}

// startFetch runs a fetch session of object "x" against fakeShard, for
// Gets whose deadline is getDeadline from now.
func startFetch(t *testing.T, getDeadline, stall time.Duration, silent bool) *fetchFixture {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(system.Shutdown)
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.DebugLevel)
	f := &fetchFixture{system: system, logs: hook, ended: make(chan *actor.PID, 1),
		fake: &fakeShard{locates: new(atomic.Int32), afterFailure: new(atomic.Int32), silent: silent}}
	shard := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return f.fake }))
	store := storenode.NewStore(1 << 20)
	f.obj, _ = store.Reserve("x")
	f.cfg = (&Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
		Store: store, ShardFor: func(string) *actor.PID { return shard }, Transport: transport.NewMemory(0),
		ChunkSize: 32 << 10, StallTimeout: stall, Log: logrus.NewEntry(log)}).withDefaults()
	d := new(atomic.Int64)
	d.Store(time.Now().Add(getDeadline).UnixNano())
	child := make(chan *actor.PID, 1)
	system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fetchParent{props: newFetchProps(f.cfg, f.obj, d), ended: f.ended, child: child}
	}))
	f.child = <-child
	return f
}

// waitEnded waits for the session to end; the limit is far beyond the
// Gets' deadline plus the stall timeout, which bound it.
func (f *fetchFixture) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-f.ended:
	case <-time.After(20 * time.Second):
		t.Fatalf("the fetch session still runs (%d Locates, %d after the sender failed): a shard answering UNAVAILABLE keeps it going forever",
			f.fake.locates.Load(), f.fake.afterFailure.Load())
	}
	// Which of the two ends the last attempt depends on where the grace
	// runs out: between attempts, or during the last Locate.
	if _, _, err := f.obj.Progress(); !errors.Is(err, messages.ErrUnavailable) && !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("the abandoned copy's error is %v, want UNAVAILABLE or TIMEOUT", err)
	}
}

// TestFetchGivesUpAfterSenderFailureWhenShardStaysUnavailable: after its
// sender failed, a fetch keeps locating for a grace of one stall timeout
// past the Gets' deadline, but no longer: a shard that keeps answering
// UNAVAILABLE must not keep it alive forever.
func TestFetchGivesUpAfterSenderFailureWhenShardStaysUnavailable(t *testing.T) {
	f := startFetch(t, 50*time.Millisecond, 100*time.Millisecond, false)
	f.waitEnded(t)
	if f.fake.afterFailure.Load() == 0 {
		t.Fatal("the session never located again after its sender failed")
	}
}

// TestFetchSessionLogsUnknownMessages: a message a fetch session does not
// expect is dropped with a warning, not silently.
func TestFetchSessionLogsUnknownMessages(t *testing.T) {
	f := startFetch(t, time.Minute, time.Minute, true) // the session waits in Locate
	f.system.Root.Send(f.child, "stray")
	end := time.Now().Add(10 * time.Second)
	for !f.warned("string") {
		if time.Now().After(end) {
			t.Fatalf("no warning about the stray message in %d log entries", len(f.logs.AllEntries()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := f.system.Root.StopFuture(f.child).Wait(); err != nil {
		t.Fatal(err)
	}
}

func (f *fetchFixture) warned(typ string) bool {
	for _, e := range f.logs.AllEntries() {
		if e.Level == logrus.WarnLevel && e.Data["type"] == typ {
			return true
		}
	}
	return false
}

// A fetch session superseded while it located an inline object (its store
// node restarted, and the restarted node's session stored the object
// first) neither wipes the newer copy nor fails it for the Gets that wait
// on it: chaos seed 51 saw those Gets fail CANCELED "writer superseded".
func TestSupersededInlineFetchLeavesTheNewerCopy(t *testing.T) {
	store := storenode.NewStore(1 << 20)
	fc := storenode.FetchConfig{Self: &messages.NodeRef{NodeId: "n"}, Grace: time.Second}
	obj, _ := store.Reserve("x")
	data := []byte("the object's bytes")
	now := time.Unix(1000, 0)
	loc := &messages.LocateReply{ObjectId: "x", Size: int64(len(data)), HasInline: true, InlineData: data, Attempt: 1}

	old := storenode.NewFetch(fc, store, obj, now.Add(time.Minute), nil)
	old.Start(now) // the session before the restart
	newer := storenode.NewFetch(fc, store, obj, now.Add(time.Minute), nil)
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

// watchCountingShard is a directory shard as a bare Process: it answers
// every Locate with the object inline, after a delay, and counts the
// Watch and Unwatch system messages it gets.
type watchCountingShard struct {
	system             *actor.ActorSystem
	delay              time.Duration
	watches, unwatches atomic.Int32
}

func (s *watchCountingShard) SendUserMessage(_ *actor.PID, message any) {
	env, ok := message.(*actor.MessageEnvelope)
	if !ok {
		return
	}
	l, ok := env.Message.(*messages.Locate)
	if !ok || env.Sender == nil {
		return
	}
	data := []byte("inline bytes")
	reply := &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt(), Size: int64(len(data)), HasInline: true, InlineData: data}
	time.AfterFunc(s.delay, func() { s.system.Root.Send(env.Sender, reply) })
}

func (s *watchCountingShard) SendSystemMessage(_ *actor.PID, message any) {
	switch message.(type) {
	case *actor.Watch:
		s.watches.Add(1)
	case *actor.Unwatch:
		s.unwatches.Add(1)
	}
}

func (s *watchCountingShard) Stop(*actor.PID) {}

// A fetch session leaves no watch behind on the shard it asked: a
// watched actor keeps its watchers until it stops, so every Get would
// otherwise add one for good to a long-lived shard. A Locate answered
// quickly costs no watch at all (two fewer messages across the network);
// one answered late is watched meanwhile, and unwatched at the end.
func TestFetchSessionLeavesNoWatchOnTheShard(t *testing.T) {
	defer func(d time.Duration) { watchDelay = d }(watchDelay)
	for _, tc := range []struct {
		name         string
		delay, watch time.Duration // the shard's answer, the session's watch
		wantWatches  int32
	}{{"answered before the watch is due", 0, time.Hour, 0}, {"answered late", 300 * time.Millisecond, time.Millisecond, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			watchDelay = tc.watch
			system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
				return slog.New(slog.NewTextHandler(io.Discard, nil))
			}))
			t.Cleanup(system.Shutdown)
			shard := &watchCountingShard{system: system, delay: tc.delay}
			pid, ok := system.ProcessRegistry.Add(shard, "counting-shard")
			if !ok {
				t.Fatal("shard process not registered")
			}
			store := storenode.NewStore(1 << 20)
			obj, _ := store.Reserve("x")
			cfg := (&Config{Self: &messages.NodeRef{NodeId: "me", Address: system.Address(), ActorId: "me/store", DataAddress: "mem://me"},
				Store: store, ShardFor: func(string) *actor.PID { return pid }, Transport: transport.NewMemory(0),
				StallTimeout: 10 * time.Second, Log: logrus.NewEntry(logrus.New())}).withDefaults()
			d := new(atomic.Int64)
			d.Store(time.Now().Add(10 * time.Second).UnixNano())
			ended, child := make(chan *actor.PID, 1), make(chan *actor.PID, 1)
			system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &fetchParent{props: newFetchProps(cfg, obj, d), ended: ended, child: child}
			}))
			<-child
			select {
			case <-ended:
			case <-time.After(10 * time.Second):
				t.Fatal("the fetch session did not end")
			}
			if b, err := obj.Bytes(); err != nil || string(b) != "inline bytes" {
				t.Fatalf("fetched %q, %v", b, err)
			}
			// The Unwatch is sent as the session ends; give it a moment.
			for wait := time.Now().Add(5 * time.Second); shard.unwatches.Load() < shard.watches.Load() && time.Now().Before(wait); {
				time.Sleep(time.Millisecond)
			}
			if w, u := shard.watches.Load(), shard.unwatches.Load(); w != tc.wantWatches || u != w {
				t.Fatalf("the shard got %d watches and %d unwatches, want %d and as many unwatches", w, u, tc.wantWatches)
			}
		})
	}
}
