package actorutil

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// ask makes the test's owner actor send echo{"x"} to to through its
// Senders.
type ask struct{ to *actor.PID }

// closeSenders makes the owner close its Senders and answer.
type closeSenders struct{}

// heard is what the owner got: a message and its sender.
type heard struct {
	msg  any
	from *actor.PID
}

// A request sent through Senders is answered to its actor with the
// answerer as sender; one to an actor that is not running comes back as
// a DeadLetterResponse naming that actor (Proto.Actor's names none).
func TestSendersNameTheTargetOfADeadLetter(t *testing.T) {
	system := actor.NewActorSystem()
	root := system.Root
	out := make(chan heard, 8)
	var s Senders
	owner := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case ask:
			s.Request(ctx, m.to, echo{"x"})
		case closeSenders:
			s.Close()
			ctx.Respond(s.Len())
		case echo, *actor.DeadLetterResponse:
			out <- heard{m, ctx.Sender()}
		}
	}))
	answering := root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(echo); ok {
			ctx.Request(ctx.Sender(), echo{m.v + "!"}) // an answer that names its sender
		}
	}))
	gone := make([]*actor.PID, 2)
	for i := range gone {
		gone[i] = root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
		if err := root.StopFuture(gone[i]).Wait(); err != nil {
			t.Fatal(err)
		}
	}
	next := func() heard {
		t.Helper()
		select {
		case h := <-out:
			return h
		case <-time.After(10 * time.Second):
			t.Fatal("the owner heard nothing")
			return heard{}
		}
	}

	root.Send(owner, ask{answering})
	if h := next(); h.msg != (echo{"x!"}) || !h.from.Equal(answering) {
		t.Fatalf("answer %v from %v, want echo{x!} from %v", h.msg, h.from, answering)
	}
	// Two targets gone: each dead letter names its own.
	for _, g := range gone {
		root.Send(owner, ask{g})
		h := next()
		dl, ok := h.msg.(*actor.DeadLetterResponse)
		if !ok || dl.GetTarget() == nil || !dl.GetTarget().Equal(g) {
			t.Fatalf("got %v, want a DeadLetterResponse naming %v", h.msg, g)
		}
	}

	// One sender per target, removed from the registry by Close.
	if n := sendersRegistered(system); n != 3 {
		t.Fatalf("%d senders registered, want 3", n)
	}
	res, err := root.RequestFuture(owner, closeSenders{}, 10*time.Second).Result()
	if err != nil || res != 0 {
		t.Fatalf("close: %v, %v", res, err)
	}
	if n := sendersRegistered(system); n != 0 {
		t.Fatalf("%d senders left registered after Close", n)
	}
}

// sendersRegistered counts the Senders' processes in system's registry.
func sendersRegistered(system *actor.ActorSystem) int {
	n := 0
	for _, bucket := range system.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, id := range bucket.Keys() {
			if strings.Contains(id, "/sender$") {
				n++
			}
		}
	}
	return n
}
