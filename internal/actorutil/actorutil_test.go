package actorutil

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

func TestTypeName(t *testing.T) {
	if got := TypeName(&messages.Put{}); got != "hoplite.Put" {
		t.Errorf("TypeName(Put) = %q", got)
	}
	if got := TypeName(struct{ x int }{}); got != "struct { x int }" {
		t.Errorf("TypeName(struct) = %q", got)
	}
}

type tick struct{}

// Tick delivers ticks until stop closes, and then returns.
func TestTickStopsWhenTold(t *testing.T) {
	sys := actor.NewActorSystem()
	defer sys.Shutdown()
	got := make(chan struct{}, 16)
	pid := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		if _, ok := c.Message().(tick); ok {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	}))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		Tick(sys, pid, time.Millisecond, tick{}, stop)
		close(done)
	}()
	for range 3 {
		select {
		case <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("no tick")
		}
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Tick did not return after stop closed")
	}
}
