package coordinator

import (
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction"
)

// The shapes are the names the coordinator's core writes into a plan.
func TestShapesAreTheCoresNames(t *testing.T) {
	for s, core := range map[Shape]string{Inline: reduction.ShapeInline, DAry: reduction.ShapeDAry,
		ChainLeaf: reduction.ShapeChainLeaf, Sliced: reduction.ShapeSliced} {
		if string(s) != core {
			t.Errorf("shape %q is %q in the core", s, core)
		}
	}
}
