package reduction

import (
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// finishTwoSourceTree completes a tree Reduction whose only task is its root's
// (two sources) and returns the answer.
func finishTwoSourceTree(t *testing.T, r *Reduction, fx Effects) *messages.ReduceReply {
	t.Helper()
	if fx.Reply() != nil {
		t.Fatalf("answered %v before the tree ran", fx.Reply())
	}
	if fx.StoreInline() != nil {
		t.Fatalf("reduced in the coordinator without every source's bytes: %+v", fx.StoreInline())
	}
	tasks := fx.Tasks()
	if len(tasks) != 1 {
		t.Fatalf("tasks %v, want the root's", tasks)
	}
	root := tasks[0].Task
	var inputs []string
	inputs = append(inputs, root.GetSourceId())
	for _, c := range root.GetChildren() {
		inputs = append(inputs, c.GetObjectId())
	}
	slices.Sort(inputs)
	if !slices.Equal(inputs, []string{"a", "b"}) {
		t.Fatalf("the root reduces %v, want a and b", inputs)
	}
	p := int(root.GetPosition())
	r.Started(started(p), t0)
	fx = r.Done(done(p), t0)
	if fx.Reply() == nil || fx.Reply().GetError() != nil {
		t.Fatalf("want success, got %+v", fx.Reply())
	}
	return fx.Reply()
}

// A directory shard rebuilt from the store nodes' republications knows
// an inline object's copies but not its bytes: a Reduce of such sources
// streams them from their copies (a tree), instead of failing INTERNAL
// because a small source came without its bytes.
func TestInlineSourcesWithoutBytesAreStreamed(t *testing.T) {
	small := int64(8)
	// One source came with its bytes (from a shard that kept them), the
	// next without (from a rebuilt one).
	r := newRed(request([]string{"a", "b"}, 2), Config{})
	mustEmpty(t, "a with its bytes", r.Located(locatedInline("a", make([]byte, small), node(0)), t0))
	reply := finishTwoSourceTree(t, r, r.Located(located("b", small, node(1)), t0))
	if reply.GetPlan().GetShape() == ShapeInline {
		t.Fatalf("plan %v: still inline", reply.GetPlan())
	}
	// The first arrival without its bytes: a tree from the start.
	r = newRed(request([]string{"a", "b"}, 2), Config{})
	mustEmpty(t, "a without its bytes", r.Located(located("a", small, node(0)), t0))
	finishTwoSourceTree(t, r, r.Located(locatedInline("b", make([]byte, small), node(1)), t0))
	// Past num, after the inline run reduced, a source without its bytes
	// changes nothing.
	r = newRed(request([]string{"a", "b"}, 1), Config{})
	if fx := r.Located(locatedInline("a", make([]byte, small), node(0)), t0); fx.StoreInline() == nil {
		t.Fatalf("num 1: want StoreInline at the first arrival, got %+v", fx)
	}
	mustEmpty(t, "b without its bytes past num", r.Located(located("b", small, node(1)), t0))
}
