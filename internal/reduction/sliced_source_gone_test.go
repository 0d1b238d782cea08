package reduction

import (
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// A running sliced AllReduce whose copy of a source is gone from a node
// that lives (a reader's copy, evicted on a full node after the directory
// located it there) re-plans as a tree of n and takes the source from
// another copy, whether the chain position's NOT_FOUND or the
// directory's word that the copy left comes first; the node, alive, is
// released and loses its gather's copy like the others. It failed the
// AllReduce NOT_FOUND for a source that existed (chaos seed 5001140).
func TestSlicedSourceCopyGoneFromALiveNode(t *testing.T) {
	const n = 3
	for _, first := range []string{"the position's NOT_FOUND", "the directory"} {
		t.Run(first, func(t *testing.T) {
			r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced})
			r.start = node(0)
			r.Step(t0, Begin{})
			var sliced []Task
			for i := 0; i < n; i++ {
				sliced = append(sliced, r.Step(t0, located(ids("s", n)[i], bigSize, node(i))).Tasks()...)
			}
			if r.plan.GetShape() != ShapeSliced || len(sliced) == 0 {
				t.Fatalf("shape %q with %d tasks, want a sliced run", r.plan.GetShape(), len(sliced))
			}
			// The chain position that opens s2 on n2.
			at := slices.IndexFunc(sliced, func(tk Task) bool { return tk.Task.GetSourceId() == "s2" })
			if at < 0 || sliced[at].Node.GetNodeId() != "n2" {
				t.Fatalf("no chain position opens s2 on n2: %v", sliced)
			}
			p := int(sliced[at].Task.GetPosition())
			notHere := &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: int32(p), Generation: 1,
				Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on this node", "s2")}
			left := &messages.LocationUpdate{ObjectId: "s2", Node: node(2)} // the copy left the directory
			var fx Effects
			if first == "the directory" {
				fx = r.Step(t0, left)
			} else {
				fx = r.Step(t0, notHere)
			}
			if fx.Reply() != nil {
				t.Fatalf("the AllReduce answered: %v", fx.Reply())
			}
			if ev := replanned(fx); ev == nil || ev.Node != "n2" || ev.Num != n || !slices.Equal(ev.Lost, []string{"s2"}) ||
				r.plan.GetShape() != ShapeDAry || r.req.GetNumObjects() != n {
				t.Fatalf("re-plan %+v, shape %q, n %d; want a tree of %d without s2's copy on n2", ev, r.plan.GetShape(), r.req.GetNumObjects(), n)
			}
			if !slices.ContainsFunc(fx.Sends, func(s outbox.Send) bool {
				m, ok := s.Msg.(*messages.Subscribe)
				return ok && m.GetObjectId() == "s2"
			}) {
				t.Fatalf("s2 not asked for again: %v", fx.Sends)
			}
			var drops, releases []string
			for _, s := range fx.Sends {
				switch s.Msg.(type) {
				case *messages.DropObject:
					drops = append(drops, s.To.(*messages.NodeRef).GetNodeId())
				case *messages.ReduceRelease:
					releases = append(releases, s.To.(*messages.NodeRef).GetNodeId())
				}
			}
			slices.Sort(drops)
			slices.Sort(releases)
			if want := []string{"n0", "n1", "n2"}; !slices.Equal(drops, want) || !slices.Equal(releases, want) {
				t.Fatalf("drops %v, releases %v, want %v: n2 lives and its gather's copy must go", drops, releases, want)
			}
			// The other report, late: nothing more.
			var late Effects
			if first == "the directory" {
				late = r.Step(t0, notHere)
			} else {
				late = r.Step(t0, left)
			}
			if late.Reply() != nil || replanned(late) != nil || len(late.Tasks()) != 0 {
				t.Fatalf("the late report changed the run: %+v", late)
			}
			// The shard offers the reader's copy on n5.
			tasks := append(fx.Tasks(), r.Step(t0, completeAt("s2", node(5))).Tasks()...)
			if !slices.ContainsFunc(tasks, func(tk Task) bool { return tk.Task.GetSourceId() == "s2" && tk.Node.GetNodeId() == "n5" }) {
				t.Fatalf("s2 not placed on n5: %v", tasks)
			}
			reply, _ := finishTree(t, r, tasks)
			mustReduce(t, reply, ids("s", n), nil)
		})
	}
}
