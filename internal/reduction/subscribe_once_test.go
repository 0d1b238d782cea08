package reduction

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// subscriptions lists fx's Subscribes ("a" standing, "a<" with
// once_below) and Unsubscribes ("-a"), in order.
func subscriptions(fx Effects) []string {
	var out []string
	for _, s := range fx.Sends {
		switch m := s.Msg.(type) {
		case *messages.Subscribe:
			if m.GetOnceBelow() > 0 {
				out = append(out, m.GetObjectId()+"<")
			} else {
				out = append(out, m.GetObjectId())
			}
		case *messages.Unsubscribe:
			out = append(out, "-"+m.GetObjectId())
		}
	}
	return out
}

func endedInline(id string, data []byte, n *messages.NodeRef) *messages.LocationUpdate {
	u := locatedInline(id, data, n)
	u.Ended = true
	return u
}

// A Reduce of inline sources offers its shards to end each subscription
// with the answer that carries the source's bytes (once_below, its
// inline limit), and at its end unsubscribes only from the sources whose
// subscriptions no ended answer accounts for: a shard that ignored the
// offer (an older member), or answered without ending.
func TestInlineSubscriptionsEndWithTheirAnswers(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c"}, 3), Config{})
	if got := subscriptions(r.Step(t0, Begin{})); fmt.Sprint(got) != "[a< b< c<]" {
		t.Fatalf("Begin subscribes %v, want every source with once_below", got)
	}
	mustEmpty(t, "a", r.Step(t0, endedInline("a", make([]byte, 8), node(0))))
	mustEmpty(t, "b", r.Step(t0, endedInline("b", make([]byte, 8), node(1))))
	if fx := r.Step(t0, locatedInline("c", make([]byte, 8), node(2))); fx.StoreInline() == nil {
		t.Fatalf("want StoreInline, got %+v", fx)
	}
	fx := r.Step(t0, &messages.StoreReducedReply{ReduceId: testReduceID})
	if fx.Reply() == nil || fx.Reply().GetError() != nil {
		t.Fatalf("want success, got %+v", fx.Reply())
	}
	if got := subscriptions(fx); fmt.Sprint(got) != "[-c]" {
		t.Fatalf("the answer's step sends %v, want the Unsubscribe of c only", got)
	}
}

// A source whose subscription ended is followed again, standing, when
// the Reduction needs its updates after all: at once when a source
// without its bytes turns the Reduce into a tree (which repairs from
// its sources' copies), and at the next resubscription while an inline
// Reduce still waits (a deletion of a source it holds fails it).
func TestEndedSubscriptionsAreFollowedAgainWhenNeeded(t *testing.T) {
	r := newRed(request([]string{"a", "b"}, 2), Config{})
	r.Step(t0, Begin{})
	mustEmpty(t, "a", r.Step(t0, endedInline("a", make([]byte, 8), node(0))))
	fx := r.Step(t0, located("b", 8, node(1))) // from a rebuilt shard: no bytes
	if len(fx.Tasks()) == 0 {
		t.Fatalf("want the tree's tasks, got %+v", fx)
	}
	if got := subscriptions(fx); fmt.Sprint(got) != "[a]" {
		t.Fatalf("the tree's first step subscribes %v, want a again, standing", got)
	}
	if got := subscriptions(r.Step(t0, Abort{Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "stop")})); fmt.Sprint(got) != "[-a -b]" {
		t.Fatalf("the end unsubscribes %v, want both", got)
	}

	r = newRed(request([]string{"a", "b"}, 2), Config{})
	r.Step(t0, Begin{})
	mustEmpty(t, "a", r.Step(t0, endedInline("a", make([]byte, 8), node(0))))
	if got := subscriptions(r.Step(t0, ResubscribeTimer{})); fmt.Sprint(got) != "[a b<]" {
		t.Fatalf("the resubscription sends %v, want a standing and b with once_below", got)
	}
	fx = r.Step(t0, &messages.LocationUpdate{ObjectId: "a", Deleted: true})
	if err := messages.ErrOrNil(fx.Reply().GetError()); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("a held source's deletion: %v, want DELETED", err)
	}
	if got := subscriptions(fx); !slices.Equal(got, []string{"-a", "-b"}) {
		t.Fatalf("the end unsubscribes %v, want both", got)
	}
}
