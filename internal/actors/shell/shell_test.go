package shell

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// recorder is an actor that records what it receives, as strings.
type recorder struct {
	mu  sync.Mutex
	got []string
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

func (r *recorder) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wrapperspb.StringValue:
		r.add("msg " + m.GetValue())
	case string:
		r.add("timer " + m)
	case *actor.Terminated:
		r.add("terminated " + m.GetWho().GetId())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: timed out", what)
		}
	}
}

// A Carrier carries out a Box in order: routed sends go to Route, the
// others to what Resolve names (an address it cannot resolve is
// dropped); a run its sends ended gets no timer; by default a timer's
// message comes back to the actor, a watch is ctx.Watch and an event is
// published.
func TestCarrierCarriesABox(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	peer := &recorder{}
	peerPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return peer }))
	watched := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	events := make(chan any, 4)
	sub := system.EventStream.Subscribe(func(e any) {
		if s, ok := e.(string); ok {
			events <- s
		}
	})
	defer system.EventStream.Unsubscribe(sub)

	var routed []string
	c := &Carrier[string]{
		Resolve: func(to any) *actor.PID {
			if to == "peer" {
				return peerPID
			}
			if to == "watched" {
				return watched
			}
			return nil
		},
		Route: func(_ actor.Context, r string, s outbox.Send) bool {
			if s.To == "routed" {
				routed = append(routed, r+":"+s.Msg.(*wrapperspb.StringValue).GetValue())
				return true
			}
			return false
		},
	}
	self := &recorder{}
	ended := map[string]bool{"over": true}
	var carried []bool
	done := make(chan struct{})
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		self.Receive(ctx)
		if _, ok := ctx.Message().(*actor.Started); !ok {
			return
		}
		var b outbox.Box
		b.Send("routed", wrapperspb.String("1"))
		b.Send("peer", wrapperspb.String("2"))
		b.Send("nobody", wrapperspb.String("3"))
		b.After(time.Now(), "fired")
		b.WatchFor("watched")
		b.Emit("event")
		carried = append(carried, c.Carry(ctx, "run", b, func(r string) bool { return ended[r] }))
		carried = append(carried, c.Carry(ctx, "over", b, func(r string) bool { return ended[r] }))
		close(done)
	}))
	<-done
	if fmt.Sprint(carried) != "[true false]" {
		t.Fatalf("Carry reported %v; want a carried run and an ended one", carried)
	}
	if fmt.Sprint(routed) != "[run:1 over:1]" {
		t.Fatalf("routed %v", routed)
	}
	waitFor(t, "the peer's messages", func() bool { return len(peer.seen()) == 2 })
	waitFor(t, "the timer", func() bool { return len(self.seen()) == 1 })
	if got := self.seen(); got[0] != "timer fired" {
		t.Fatalf("the actor got %v; want one timer (the ended run arms none)", got)
	}
	select {
	case e := <-events:
		if e != "event" {
			t.Fatalf("event %v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event published")
	}
	// The watch: the watched actor's end reaches the actor.
	system.Root.Stop(watched)
	waitFor(t, "the watched actor's end", func() bool { return len(self.seen()) == 2 })
	if got := self.seen(); got[1] != "terminated "+watched.GetId() {
		t.Fatalf("the actor got %v", got)
	}
}

// A Timer keeps one pending wait: arming it again stops the one before.
func TestTimerKeepsOneWait(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	self := &recorder{}
	var tm Timer
	armed := make(chan struct{})
	system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		self.Receive(ctx)
		if _, ok := ctx.Message().(*actor.Started); ok {
			tm.Arm(ctx, time.Now().Add(time.Hour), "first")
			tm.Arm(ctx, time.Now(), "second")
			close(armed)
		}
	}))
	<-armed
	waitFor(t, "the timer", func() bool { return len(self.seen()) == 1 })
	tm.Stop()
	if got := self.seen(); got[0] != "timer second" {
		t.Fatalf("got %v", got)
	}
}
