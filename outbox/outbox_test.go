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
