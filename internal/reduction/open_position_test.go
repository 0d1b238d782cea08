package reduction

import (
	"fmt"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// mustAddressNodes fails t if a step sends to a node it cannot name: a
// message for "no node" is lost at best, and a shell or the simulator
// that resolves it stops.
func mustAddressNodes(t *testing.T, step string, fx Effects) {
	t.Helper()
	for _, s := range fx.Sends {
		if n, ok := s.To.(*messages.NodeRef); ok && n.GetNodeId() == "" {
			t.Fatalf("%s: %T sent to no node: %v", step, s.Msg, s.Msg)
		}
	}
}

// TestRepairOfAnOpenAncestorSendsNothing: a position whose holder's node
// failed with no backup to take it stays open, its worker gone with that
// node. When a source below it fails later, its repair invalidates the
// ancestors' work; the open one has none left to stop, and no message
// may go to the node it no longer has. Every order of the failures of a
// 3-source tree's nodes is tried, each node holding one source.
func TestRepairOfAnOpenAncestorSendsNothing(t *testing.T) {
	orders := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, d := range []int{1, 2} {
		for _, order := range orders {
			t.Run(fmt.Sprintf("d%d-%v", d, order), func(t *testing.T) {
				sources := ids("s", 3)
				r := newRed(request(sources, 3), Config{ForceDegree: d})
				for i, id := range sources {
					mustAddressNodes(t, "arrival of "+id, r.Step(t0, located(id, bigSize, node(i))))
				}
				for _, i := range order[:2] {
					mustAddressNodes(t, fmt.Sprintf("failure of n%d", i), r.Step(t0, NodeFailed{Node: node(i).GetNodeId()}))
				}
			})
		}
	}
}
