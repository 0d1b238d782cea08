package actorutil

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

type echo struct{ v string }

// stopOnAsk stops instead of answering.
type stopOnAsk struct{}

func (stopOnAsk) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(echo); ok {
		ctx.Stop(ctx.Self())
	}
}

func TestRequestOutcomes(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	answering := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(echo); ok {
			ctx.Respond(echo{m.v + "!"})
		}
	}))
	silent := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctxFor := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}

	for range 100 { // every request leaves nothing behind (see below)
		v, err := Request(ctxFor(5*time.Second), root, answering, echo{"hi"})
		if err != nil || v != (echo{"hi!"}) {
			t.Fatalf("reply %v, %v", v, err)
		}
	}

	// A target that stops before it answers fails the request with
	// UNAVAILABLE: its Terminated resolves the watch, where an unwatched
	// future would end in TIMEOUT at the deadline.
	_, err := Request(ctxFor(time.Minute), root, root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stopOnAsk{} })), echo{"x"})
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Errorf("stopped target: %v, want UNAVAILABLE", err)
	}

	// A target that is not running.
	gone := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	if err := root.StopFuture(gone).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := Request(ctxFor(time.Minute), root, gone, echo{"x"}); !errors.Is(err, messages.ErrUnavailable) {
		t.Errorf("stopped before the request: %v, want UNAVAILABLE", err)
	}

	// No reply: TIMEOUT at the deadline; canceled: the context's error.
	if _, err := Request(ctxFor(50*time.Millisecond), root, silent, echo{"x"}); !errors.Is(err, messages.ErrTimeout) {
		t.Errorf("silent target: %v, want TIMEOUT", err)
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := Request(cctx, root, silent, echo{"x"}); !errors.Is(err, messages.ErrCanceled) {
		t.Errorf("canceled: %v, want CANCELED", err)
	}
	if _, err := Request(context.Background(), root, answering, echo{"x"}); err == nil {
		t.Error("a request without a deadline was sent")
	}

	// A target that keeps the request: at the deadline, abandon is told
	// the PID the target would answer to.
	asked := make(chan *actor.PID, 1)
	keeper := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(echo); ok {
			asked <- ctx.Sender()
		}
	}))
	var abandoned *actor.PID
	_, err = RequestOrAbandon(ctxFor(50*time.Millisecond), root, keeper, echo{"x"}, func(replyTo *actor.PID) { abandoned = replyTo })
	if !errors.Is(err, messages.ErrTimeout) {
		t.Errorf("kept request: %v, want TIMEOUT", err)
	}
	if replyTo := <-asked; abandoned == nil || !abandoned.Equal(replyTo) {
		t.Errorf("abandoned %v, the target was asked by %v", abandoned, replyTo)
	}

	// Finished requests leave nothing registered: the only processes
	// left are the test's own actors.
	if n := requestsRegistered(system); n != 0 {
		t.Fatalf("%d requests left registered", n)
	}
}

// requestsRegistered counts the reply catchers in system's registry.
func requestsRegistered(system *actor.ActorSystem) int {
	n := 0
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if strings.HasPrefix(id, "request") {
				n++
			}
		}
	}
	return n
}

// RequestEvery sends again while no answer came, and takes the answer to
// any of its sends: one to a send that was lost (the target dropped the
// first), and one slower than the interval (the target answers the first
// send only once the second came).
func TestRequestEvery(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	seen := 0
	dropsFirst := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(echo); ok {
			if seen++; seen > 1 {
				ctx.Respond(echo{m.v + "!"})
			}
		}
	}))
	if v, err := RequestEvery(ctx, root, dropsFirst, echo{"lost"}, time.Millisecond); err != nil || v != (echo{"lost!"}) {
		t.Errorf("first send lost: %v, %v; want the answer to the second", v, err)
	}

	var first *actor.PID
	asked := 0
	slow := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(echo); !ok {
			return
		}
		switch asked++; asked {
		case 1:
			first = ctx.Sender()
		case 2:
			ctx.Send(first, echo{"first"})
		}
	}))
	if v, err := RequestEvery(ctx, root, slow, echo{"x"}, time.Millisecond); err != nil || v != (echo{"first"}) {
		t.Errorf("slow answer: %v, %v; want the answer to the first send", v, err)
	}

	// No answer at all: TIMEOUT at the deadline, as Request.
	silent := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	sctx, scancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer scancel()
	if _, err := RequestEvery(sctx, root, silent, echo{"x"}, time.Millisecond); !errors.Is(err, messages.ErrTimeout) {
		t.Errorf("silent target: %v, want TIMEOUT", err)
	}
}

// RequestAll gives exactly one answer per target, with its index: the
// replies of the ones that answer, UNAVAILABLE for one that stops, and a
// deadline error for one that never answers, once the context ends.
func TestRequestAll(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	answering := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(echo); ok {
			ctx.Respond(echo{m.v + "!"})
		}
	}))
	stopping := root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stopOnAsk{} }))
	silent := root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	answers := RequestAll(ctx, root, []*actor.PID{silent, answering, stopping, answering}, echo{"a"}, 100*time.Millisecond)
	got := map[int]Answer{}
	for range 4 {
		a := <-answers
		if _, dup := got[a.Index]; dup {
			t.Fatalf("two answers for target %d", a.Index)
		}
		got[a.Index] = a
	}
	for _, i := range []int{1, 3} {
		if got[i].Err != nil || got[i].Msg != (echo{"a!"}) {
			t.Errorf("target %d: %v, %v; want its reply", i, got[i].Msg, got[i].Err)
		}
	}
	if !errors.Is(got[2].Err, messages.ErrUnavailable) {
		t.Errorf("stopped target: %v; want UNAVAILABLE", got[2].Err)
	}
	if !errors.Is(got[0].Err, messages.ErrTimeout) {
		t.Errorf("silent target: %v; want TIMEOUT", got[0].Err)
	}
}

// farTarget is an actor on another member, as the registry resolves one:
// it answers an echo at once, or (late) only once it is watched, or
// (gone) never, answering a Watch with Terminated as a member does for
// an actor it does not hold.
type farTarget struct {
	system             *actor.ActorSystem
	late, gone         bool
	watches, unwatches atomic.Int32
	pending            *actor.PID
}

func (f *farTarget) SendUserMessage(_ *actor.PID, message any) {
	_, msg, sender := actor.UnwrapEnvelope(message)
	if m, ok := msg.(echo); ok && !f.gone {
		if f.late && f.watches.Load() == 0 {
			f.pending = sender
			return
		}
		f.system.Root.Send(sender, echo{m.v + "!"})
	}
}

func (f *farTarget) SendSystemMessage(pid *actor.PID, message any) {
	switch m := message.(type) {
	case *actor.Watch:
		f.watches.Add(1)
		if f.gone {
			w, _ := f.system.ProcessRegistry.Get(m.Watcher)
			w.SendSystemMessage(m.Watcher, &actor.Terminated{Who: pid, Why: actor.TerminatedReason_NotFound})
		} else if f.pending != nil {
			f.system.Root.Send(f.pending, echo{"late!"})
		}
	case *actor.Unwatch:
		f.unwatches.Add(1)
	}
}

func (*farTarget) Stop(*actor.PID) {}

// A request to an actor on another member watches it only once it is
// late (RemoteWatchDelay): answered in time it costs no Watch and no
// Unwatch across the network; a late one is watched, and a target
// already gone fails it then, UNAVAILABLE rather than at its deadline.
func TestRequestWatchesARemoteTargetOnlyWhenLate(t *testing.T) {
	defer SetRemoteWatchDelay(30 * time.Millisecond)()
	system := actor.NewActorSystem()
	far := &farTarget{system: system}
	system.ProcessRegistry.RegisterAddressResolver(func(p *actor.PID) (actor.Process, bool) {
		return far, p.GetAddress() == "far:1"
	})
	pid := actor.NewPID("far:1", "target")
	if !IsRemote(system, pid) || IsRemote(system, system.NewLocalPID("x")) {
		t.Fatal("IsRemote does not tell the far PID from a local one")
	}
	ask := func() (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return Request(ctx, system.Root, pid, echo{"hi"})
	}
	if r, err := ask(); err != nil || r != (echo{"hi!"}) {
		t.Fatalf("quick answer: %v, %v", r, err)
	}
	if w, u := far.watches.Load(), far.unwatches.Load(); w != 0 || u != 0 {
		t.Fatalf("a request answered at once sent %d watches and %d unwatches, want none", w, u)
	}
	far.late = true
	if r, err := ask(); err != nil || r != (echo{"late!"}) {
		t.Fatalf("late answer: %v, %v", r, err)
	}
	if w, u := far.watches.Load(), far.unwatches.Load(); w != 1 || u != 1 {
		t.Fatalf("a late request sent %d watches and %d unwatches, want 1 and 1", w, u)
	}
	far.late, far.gone = false, true
	// Ended by the late watch's Terminated, not by its deadline (which
	// would be TIMEOUT).
	if _, err := ask(); messages.AsError(err).GetCode() != messages.ErrorCode_UNAVAILABLE {
		t.Fatalf("a request to a target gone: %v, want UNAVAILABLE", err)
	}
	if w := far.watches.Load(); w != 2 {
		t.Fatalf("%d watches after the request to a target gone, want 2 (one per late request)", w)
	}
}

// RequestWatchingLate treats a target in this process as Request treats
// one on another member: answered in time, no Watch and no Unwatch in
// its mailbox; late, watched once; a target that stopped while the
// request waited fails it UNAVAILABLE at the late watch, not TIMEOUT at
// its deadline. Request watches the same target at once.
func TestRequestWatchingLateWatchesALocalTargetOnlyWhenLate(t *testing.T) {
	defer SetRemoteWatchDelay(30 * time.Millisecond)()
	system := actor.NewActorSystem()
	local := &farTarget{system: system}
	pid, ok := system.ProcessRegistry.Add(local, "local-target")
	if !ok || IsRemote(system, pid) {
		t.Fatalf("the target %v is not a local process", pid)
	}
	ask := func(request func(context.Context, *actor.RootContext, *actor.PID, any) (any, error), to *actor.PID) (any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return request(ctx, system.Root, to, echo{"hi"})
	}
	if r, err := ask(RequestWatchingLate, pid); err != nil || r != (echo{"hi!"}) {
		t.Fatalf("quick answer: %v, %v", r, err)
	}
	if w, u := local.watches.Load(), local.unwatches.Load(); w != 0 || u != 0 {
		t.Fatalf("a request answered at once sent %d watches and %d unwatches, want none", w, u)
	}
	local.late = true
	if r, err := ask(RequestWatchingLate, pid); err != nil || r != (echo{"late!"}) {
		t.Fatalf("late answer: %v, %v", r, err)
	}
	if w, u := local.watches.Load(), local.unwatches.Load(); w != 1 || u != 1 {
		t.Fatalf("a late request sent %d watches and %d unwatches, want 1 and 1", w, u)
	}
	local.late = false
	if r, err := ask(Request, pid); err != nil || r != (echo{"hi!"}) || local.watches.Load() != 2 {
		t.Fatalf("Request: %v, %v with %d watches, want an answer and a second watch", r, err, local.watches.Load())
	}

	// A real actor that stops instead of answering: the late watch finds
	// it gone (at the deadline it would be TIMEOUT).
	stopper := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return stopOnAsk{} }))
	if _, err := ask(RequestWatchingLate, stopper); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a target that stopped: %v, want UNAVAILABLE", err)
	}
	if n := requestsRegistered(system); n != 0 {
		t.Fatalf("%d requests left registered", n)
	}
}
