package reduction

import (
	"reflect"
	"testing"
)

// The shapes of a Reduce (the inline reduce, the tree, the sliced
// AllReduce) and a knee policy's phase each own their state, over the
// core they share: no shape can reach another's state, or the Reduction
// that routes between them, and the core reaches none of them. A step of
// one shape then cannot read or change what another decided, and a shape
// that ends (a sliced run re-planned as a tree, a knee phase whose count
// is fixed) leaves nothing behind that a later step could take for live.

// shapeTypes are the types of the shapes and of the knee phase.
var shapeTypes = map[string]reflect.Type{
	"kneePhase": reflect.TypeFor[kneePhase](),
	"inlineRun": reflect.TypeFor[inlineRun](),
	"treeRun":   reflect.TypeFor[treeRun](),
	"slicedRun": reflect.TypeFor[slicedRun](),
}

// reachable are the named types of this package that a value of t can
// reach through its fields (pointers, slices, arrays and maps followed;
// other packages' types cannot name this package's).
func reachable(t reflect.Type) map[string]bool {
	pkg := reflect.TypeFor[core]().PkgPath()
	seen := map[reflect.Type]bool{}
	names := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		if seen[t] || t.Name() != "" && t.PkgPath() != pkg {
			return
		}
		seen[t] = true
		if t.Name() != "" {
			names[t.Name()] = true
		}
		switch t.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array:
			walk(t.Elem())
		case reflect.Map:
			walk(t.Key())
			walk(t.Elem())
		case reflect.Struct:
			for i := range t.NumField() {
				walk(t.Field(i).Type)
			}
		}
	}
	for i := range t.NumField() {
		walk(t.Field(i).Type)
	}
	return names
}

func TestShapesReachOnlyTheCore(t *testing.T) {
	forbidden := func(except string) []string {
		out := []string{"Reduction"}
		for name := range shapeTypes {
			if name != except {
				out = append(out, name)
			}
		}
		return out
	}
	for _, name := range forbidden("") {
		if name != "Reduction" && reachable(reflect.TypeFor[core]())[name] {
			t.Errorf("the core reaches %s: a shape's state in the state every shape shares", name)
		}
	}
	if reachable(reflect.TypeFor[core]())["Reduction"] {
		t.Errorf("the core reaches the Reduction, and through it every shape")
	}
	for name, typ := range shapeTypes {
		got := reachable(typ)
		if !got["core"] {
			t.Errorf("%s does not reach the core: it is not built over the state the shapes share", name)
		}
		for _, other := range forbidden(name) {
			if got[other] {
				t.Errorf("%s reaches %s: a shape carries another's state, or the Reduction's", name, other)
			}
		}
	}
}

// checkShapes checks what a Reduction runs after a step: at most one
// shape, each over the Reduction's own core (not a copy that would stop
// seeing the others' arrivals); a knee policy's phase only while no shape
// is chosen; and the shape that runs is the one the plan names.
func checkShapes(t testing.TB, r *Reduction) {
	t.Helper()
	var running []string
	if r.inline != nil {
		running = append(running, "inline")
		if r.inline.core != r.core || r.plan.GetShape() != ShapeInline {
			t.Fatalf("an inline reduce over another core, or planned as %q", r.plan.GetShape())
		}
	}
	if r.tree != nil {
		running = append(running, "tree")
		if s := r.plan.GetShape(); r.tree.core != r.core || s != ShapeDAry && s != ShapeChainLeaf {
			t.Fatalf("a tree over another core, or planned as %q", s)
		}
	}
	if r.sliced != nil {
		running = append(running, "sliced")
		if r.sliced.core != r.core || r.plan.GetShape() != ShapeSliced {
			t.Fatalf("a sliced AllReduce over another core, or planned as %q", r.plan.GetShape())
		}
	}
	if len(running) > 1 {
		t.Fatalf("shapes %v run at once", running)
	}
	if r.knee != nil && (len(running) > 0 || r.knee.core != r.core) {
		t.Fatalf("a knee phase beside shape %v, or over another core", running)
	}
}
