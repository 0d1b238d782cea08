package outbox

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

func TestBoxKeepsOrderAndDropsTells(t *testing.T) {
	var b Box
	if !b.Empty() {
		t.Fatal("a new box is not empty")
	}
	b.Send("a", wrapperspb.String("1"))
	b.Send(nil, wrapperspb.String("no receiver"))
	b.Send("b", nil)
	var o Box
	o.Send("c", wrapperspb.String("2"))
	at := time.Unix(100, 0)
	o.After(at, "tick")
	b.Merge(o)
	if len(b.Sends) != 2 || b.Sends[0].To != "a" || b.Sends[1].To != "c" {
		t.Fatalf("sends %v: want a then c, the tell and the nil message dropped", b.Sends)
	}
	if len(b.Timers) != 1 || !b.Timers[0].At.Equal(at) || b.Timers[0].Msg != "tick" {
		t.Fatalf("timers %v", b.Timers)
	}
	if b.Empty() {
		t.Fatal("a box with sends reports empty")
	}
}

// Watches, unwatches and events keep their order through Merge, nil ones
// are dropped, and any of them makes a box non-empty.
func TestBoxCarriesWatchesAndEvents(t *testing.T) {
	var b Box
	b.WatchFor(nil)
	b.UnwatchFor(nil)
	b.Emit(nil)
	if !b.Empty() {
		t.Fatalf("nil watches and events were kept: %+v", b)
	}
	for _, one := range []func(*Box){
		func(b *Box) { b.WatchFor("n1") }, func(b *Box) { b.UnwatchFor("n1") }, func(b *Box) { b.Emit("e") },
	} {
		var x Box
		one(&x)
		if x.Empty() {
			t.Fatalf("a box with %+v reports empty", x)
		}
	}
	b.WatchFor("n1")
	b.Emit("e1")
	var o Box
	o.WatchFor("n2")
	o.UnwatchFor("n1")
	o.Emit("e2")
	b.Merge(o)
	if len(b.Watch) != 2 || b.Watch[0] != "n1" || b.Watch[1] != "n2" || len(b.Unwatch) != 1 || b.Unwatch[0] != "n1" {
		t.Fatalf("watch %v unwatch %v", b.Watch, b.Unwatch)
	}
	if len(b.Events) != 2 || b.Events[0] != "e1" || b.Events[1] != "e2" {
		t.Fatalf("events %v", b.Events)
	}
}

// TestSendsToKeepsOneReceiversSendsInOrder: SendsTo picks the sends to
// one receiver, in the order the step made them, and nothing else.
func TestSendsToKeepsOneReceiversSendsInOrder(t *testing.T) {
	var b Box
	b.Send("a", wrapperspb.String("1"))
	b.Send("b", wrapperspb.String("2"))
	b.Send("a", wrapperspb.String("3"))
	got := SendsTo(b.Sends, "a")
	if len(got) != 2 || got[0].Msg.(*wrapperspb.StringValue).GetValue() != "1" || got[1].Msg.(*wrapperspb.StringValue).GetValue() != "3" {
		t.Fatalf("SendsTo(a) = %v", got)
	}
	if len(SendsTo(b.Sends, "c")) != 0 {
		t.Fatal("sends to nobody asked for were returned")
	}
}
