package member

import (
	"testing"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/events"
)

// The application's stream has each failed incarnation once: a second
// member's report of the same failure is a repeat, but the failure of
// another incarnation under the same name (its id at another address) is
// a failure of its own (de-duplicated by name, it was swallowed).
func TestLocalAnnouncesEachFailedIncarnationOnce(t *testing.T) {
	app := actor.NewActorSystem()
	defer app.Shutdown()
	l := &Local{app: app, delivered: map[string]map[incarnation]bool{"node-0": {}, "node-2": {}}, announced: map[incarnation]bool{}}
	got := make(chan *events.NodeFailed, 8)
	sub := app.EventStream.Subscribe(func(e any) {
		if f, ok := e.(*events.NodeFailed); ok {
			got <- f
		}
	})
	defer app.EventStream.Unsubscribe(sub)
	first := &events.NodeFailed{Node: "node-1", Address: "127.0.0.1:1001"}
	again := &events.NodeFailed{Node: "node-1", Address: "127.0.0.1:2002"}
	l.forward("node-0", first)
	l.forward("node-2", first) // the same failure, as another member delivered it
	l.forward("node-0", again)
	l.forward("node-2", again)
	// The stream calls its subscribers as it publishes.
	if len(got) != 2 {
		t.Fatalf("%d announcements, want 2 (one per failed incarnation)", len(got))
	}
	if f := <-got; f != first {
		t.Fatalf("announced %+v first, want %+v", f, first)
	}
	if f := <-got; f != again {
		t.Fatalf("announced %+v second, want %+v", f, again)
	}
	if !l.delivered["node-2"][incarnation{"node-1", "127.0.0.1:2002"}] {
		t.Fatal("node-2's delivery of the second incarnation's failure is not recorded")
	}
}
