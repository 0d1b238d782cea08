package member

import (
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction"
)

// The shapes a user sets are the ones the coordinators recognise: a
// constant that drifted from its coordinator's would be refused by
// MemberConfig's validation, or name no plan a reply carries.
func TestShapesAreTheCoordinators(t *testing.T) {
	for _, c := range []struct{ public, internal string }{
		{ShapeDAry, reduction.ShapeDAry},
		{ShapeChainLeaf, reduction.ShapeChainLeaf},
		{ShapeSliced, reduction.ShapeSliced},
		{ShapeInline, reduction.ShapeInline},
	} {
		if c.public != c.internal {
			t.Errorf("cluster's shape %q, the coordinator's %q", c.public, c.internal)
		}
	}
}
