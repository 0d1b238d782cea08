package actor

import (
	"testing"
	"time"
)

// Hoplite patch test: an actor's first message is Started, even one sent
// the moment its name and mailbox are in place (a remote member sends to
// a directory shard by name as soon as placement names its host). A
// message sent after the mailbox's handlers were registered but before
// Started was posted ran first, on an actor that Started had not set up:
// a directory shard's nil map panic under the chaos soak. spawnedHook
// sends in that moment and waits for the message to run.
func TestStartedIsTheFirstMessage(t *testing.T) {
	system := NewActorSystem()
	defer system.Shutdown()
	first := make(chan any, 1)
	ran := make(chan struct{}) // closed once the message ran
	spawnedHook = func(pid *PID) {
		system.Root.Send(pid, "early")
		select {
		case <-ran: // it ran during the spawn
		case <-time.After(100 * time.Millisecond): // it waits for Started
		}
	}
	defer func() { spawnedHook = nil }()
	pid, err := system.Root.SpawnNamed(PropsFromFunc(func(ctx Context) {
		switch m := ctx.Message().(type) {
		case *Started:
			select {
			case first <- m:
			default:
			}
		case string:
			select {
			case first <- m:
			default:
			}
			close(ran)
		}
	}), "started-first")
	spawnedHook = nil
	if err != nil {
		t.Fatal(err)
	}
	defer system.Root.Stop(pid)
	select {
	case m := <-first:
		if _, ok := m.(*Started); !ok {
			t.Fatalf("the actor's first message was %v, not Started", m)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the actor received nothing")
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("the message sent during the spawn never ran")
	}
}
