package logbridge

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
)

// TestActorSystemOption starts a real actor system, makes an actor panic once
// and checks that Proto.Actor's failure log line reaches the logrus stream.
func TestActorSystemOption(t *testing.T) {
	l, buf := newLogger(logrus.DebugLevel)
	system := actor.NewActorSystem(ActorSystemOption(l))
	t.Cleanup(system.Shutdown)

	var panicked atomic.Bool
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(string); ok && panicked.CompareAndSwap(false, true) {
			panic(errors.New("boom"))
		}
	}))
	t.Cleanup(func() { _ = system.Root.StopFuture(pid).Wait() })
	system.Root.Send(pid, "fail")

	// The failure is logged asynchronously by the actor's mailbox goroutine:
	// poll the buffer until the line shows up or the deadline passes.
	var got map[string]any
	for deadline := time.Now().Add(5 * time.Second); got == nil; {
		for _, m := range lines(t, buf) {
			if m["msg"] == "[ACTOR] Recovering" {
				got = m
			}
		}
		if got == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no recovery line logged; log:\n%s", buf.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got["lib"] != "Proto.Actor" || got["system"] != system.ID || got["reason"] != "boom" || got["level"] != "info" {
		t.Errorf("recovery line = %v, want lib=Proto.Actor system=%s reason=boom level=info", got, system.ID)
	}
}
