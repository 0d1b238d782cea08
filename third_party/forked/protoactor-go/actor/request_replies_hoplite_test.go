package actor

import (
	"testing"
	"time"
)

// Hoplite patch: a request to an actor that does not run, in this
// process, is answered with the registered undeliverable reply instead
// of a DeadLetterResponse; a message of a type nothing registered still
// gets the DeadLetterResponse.
func TestDeadLetteredRequestGetsItsUndeliverableReply(t *testing.T) {
	old := GetRequestReplies()
	t.Cleanup(func() { SetRequestReplies(old) })
	SetRequestReplies(&RequestReplies{
		Undeliverable: func(request interface{}, target *PID, why string) (interface{}, bool) {
			if s, ok := request.(string); ok {
				return "undelivered " + s + " to " + target.Id + ": " + why, true
			}
			return nil, false
		},
	})
	system := NewActorSystem()
	defer system.Shutdown()
	got := make(chan interface{}, 4)
	requester := system.Root.Spawn(PropsFromFunc(func(ctx Context) {
		switch m := ctx.Message().(type) {
		case *PID:
			ctx.Request(m, "get")
			ctx.Request(m, 42)
		case SystemMessage, AutoReceiveMessage:
		default:
			got <- m
		}
	}))
	system.Root.Send(requester, system.NewLocalPID("gone"))
	for _, want := range []string{"undelivered get to gone: is not running", "*actor.DeadLetterResponse"} {
		select {
		case m := <-got:
			s, _ := m.(string)
			if _, dl := m.(*DeadLetterResponse); dl {
				s = "*actor.DeadLetterResponse"
			}
			if s != want {
				t.Fatalf("answer %T %v, want %s", m, m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer within 10s, want %s", want)
		}
	}
}
