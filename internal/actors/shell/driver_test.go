package shell

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// echoOut is a toy core's output: the Box and what is its own.
type echoOut struct {
	outbox.Box
	Seen string
}

// echo is a toy core: an event "send" sends to the peer and arms a
// timer whose message, "tick", comes back as an event; it records what
// it saw at which time.
type echo struct{ steps []time.Time }

func (e *echo) Step(now time.Time, ev string) echoOut {
	e.steps = append(e.steps, now)
	o := echoOut{Seen: ev}
	if ev == "send" {
		o.Send("peer", wrapperspb.String("hello"))
		o.After(now, "tick")
	}
	return o
}

// A Driver steps the core at its clock's now, carries out the Box (the
// send to what Resolve names, the timer back to the actor, where the
// shell steps it again) and returns the output; an ended run gets no
// timer.
func TestDriverStepsACoreAndCarriesItsBox(t *testing.T) {
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	defer system.Shutdown()
	peer := &recorder{}
	peerPID := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return peer }))
	at := time.Unix(1000, 0)
	over := false
	d := &Driver[*echo, string, echoOut]{
		Carrier: Carrier[*echo]{Resolve: func(to any) *actor.PID {
			if to == "peer" {
				return peerPID
			}
			return nil
		}},
		Ended: func(*echo) bool { return over },
		Now:   func() time.Time { return at },
	}
	core := &echo{}
	seen := &recorder{}
	outs := make(chan echoOut, 4)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string: // an event from outside, or the core's timer back
			o, carried := d.Step(ctx, core, core, m)
			seen.add(m)
			if !carried {
				seen.add("ended")
			}
			outs <- o
		}
	}))
	system.Root.Send(pid, "send")
	waitFor(t, "the step, the peer's message and the timer's step", func() bool {
		return len(seen.seen()) == 2 && len(peer.seen()) == 1
	})
	if got := seen.seen(); got[0] != "send" || got[1] != "tick" {
		t.Fatalf("the actor stepped %v; want the event, then the timer it armed", got)
	}
	if got := peer.seen(); got[0] != "msg hello" {
		t.Fatalf("the peer got %v", got)
	}
	if o := <-outs; o.Seen != "send" || len(o.Sends) != 1 || len(o.Timers) != 1 {
		t.Fatalf("Step returned %+v; want the core's output", o)
	}
	if len(core.steps) != 2 || !core.steps[0].Equal(at) {
		t.Fatalf("the core stepped at %v; want the driver's clock", core.steps)
	}
	// An ended run: the sends go, the timer does not.
	over = true
	system.Root.Send(pid, "send")
	waitFor(t, "the ended step", func() bool { return len(seen.seen()) == 4 && len(peer.seen()) == 2 })
	time.Sleep(20 * time.Millisecond)
	if got := seen.seen(); len(got) != 4 || got[2] != "send" || got[3] != "ended" {
		t.Fatalf("the actor saw %v; want the step reported ended and no timer", got)
	}
}

// StepAt steps at the now the shell gives, not the Driver's clock: the
// events one message turns into are stepped at the same time. (A step
// that asks for nothing touches no actor, so no context is needed.)
func TestDriverStepAtTakesTheShellsNow(t *testing.T) {
	clock := time.Unix(1000, 0)
	d := &Driver[*echo, string, echoOut]{Now: func() time.Time { return clock }}
	core := &echo{}
	given := time.Unix(2000, 0)
	for _, ev := range []string{"a", "b"} {
		if o, carried := d.StepAt(nil, core, core, given, ev); o.Seen != ev || !carried {
			t.Fatalf("StepAt(%q) = %+v, %v", ev, o, carried)
		}
	}
	if len(core.steps) != 2 || !core.steps[0].Equal(given) || !core.steps[1].Equal(given) {
		t.Fatalf("the core stepped at %v; want both at %v", core.steps, given)
	}
}
