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
	r.Step(t0, started(p))
	fx = r.Step(t0, done(p))
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
	mustEmpty(t, "a with its bytes", r.Step(t0, locatedInline("a", make([]byte, small), node(0))))
	reply := finishTwoSourceTree(t, r, r.Step(t0, located("b", small, node(1))))
	if reply.GetPlan().GetShape() == ShapeInline {
		t.Fatalf("plan %v: still inline", reply.GetPlan())
	}
	// The first arrival without its bytes: a tree from the start.
	r = newRed(request([]string{"a", "b"}, 2), Config{})
	mustEmpty(t, "a without its bytes", r.Step(t0, located("a", small, node(0))))
	finishTwoSourceTree(t, r, r.Step(t0, locatedInline("b", make([]byte, small), node(1))))
	// Past num, after the inline run reduced, a source without its bytes
	// changes nothing.
	r = newRed(request([]string{"a", "b"}, 1), Config{})
	if fx := r.Step(t0, locatedInline("a", make([]byte, small), node(0))); fx.StoreInline() == nil {
		t.Fatalf("num 1: want StoreInline at the first arrival, got %+v", fx)
	}
	mustEmpty(t, "b without its bytes past num", r.Step(t0, located("b", small, node(1))))
}
