package coordinator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// These tests are about what a Reduction learns of sources that are gone:
// locations of a node whose failure it applied (sent before the failure,
// delivered after it).

func completeAt(id string, n *messages.NodeRef) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: id, Size: bigSize, Node: n, State: messages.LocationState_COMPLETE}
}

// replanned is the AllReduceReplanned event of fx, or nil.
func replanned(fx Effects) *events.AllReduceReplanned {
	for _, e := range fx.Events {
		if ev, ok := e.(*events.AllReduceReplanned); ok {
			return ev
		}
	}
	return nil
}

// tasksOn lists the positions fx tasks node with.
func tasksOn(fx Effects, node string) []int32 {
	var out []int32
	for _, tk := range fx.Tasks() {
		if tk.Node.GetNodeId() == node {
			out = append(out, tk.Task.GetPosition())
		}
	}
	return out
}

func mustReduce(t *testing.T, reply *messages.ReduceReply, reduced, unreduced []string) {
	t.Helper()
	if reply == nil || reply.GetError() != nil {
		t.Fatalf("reply %v, want success", reply)
	}
	got := slices.Sorted(slices.Values(reply.GetReducedIds()))
	un := slices.Sorted(slices.Values(reply.GetUnreducedIds()))
	if !slices.Equal(got, reduced) || !slices.Equal(un, unreduced) {
		t.Fatalf("reduced %v, unreduced %v; want %v and %v", got, un, reduced, unreduced)
	}
}

// A location of a node whose failure the AllReduce applied was sent
// before that failure (the shard had not heard of it yet, or a
// resubscription crossed it): it must not make the lost source possible
// again. It did (the location cleared the lost mark), so at the next
// failure n stayed as it was, the dead node's source took the free
// position as a "backup", and the AllReduce waited for it.
func TestLateLocationOfAFailedNodeIsStale(t *testing.T) {
	r := newRed(allReduceRequest(ids("s", 4)), Config{AllReduceShape: ShapeDAry})
	r.start = node(9)
	r.Begin(t0)
	for i := 0; i < 4; i++ {
		r.Located(completeAt(fmt.Sprintf("s%d", i), node(i)), t0)
	}
	if ev := replanned(r.NodeFailed("n0", t0)); ev == nil || ev.Num != 3 {
		t.Fatalf("n0 failed: replan %+v, want n lowered to 3", ev)
	}
	// The shard sent s0's location on n0 before it heard n0 failed.
	fx := r.Located(completeAt("s0", node(0)), t0)
	if !isEmpty(fx) || len(fx.Watch) != 0 || len(fx.Events) != 0 {
		t.Errorf("a location of the failed n0 was taken: %+v", fx)
	}
	fx = r.NodeFailed("n1", t0)
	if ev := replanned(fx); ev == nil || ev.Num != 2 || !slices.Equal(ev.Lost, []string{"s1"}) {
		t.Fatalf("n1 failed: replan %+v, want n lowered to 2 without s1", ev)
	}
	if on := tasksOn(fx, "n0"); len(on) != 0 {
		t.Fatalf("positions %v tasked on the failed n0", on)
	}
	// A member that starts again at n1's address is a new incarnation
	// with a new id: its copy of s1 counts (a backup now).
	again := &messages.NodeRef{NodeId: "n1.1", Address: node(1).GetAddress(), ActorId: node(1).GetActorId()}
	back := r.Located(completeAt("s1", again), t0)
	if got := nodeIDs(back.Watch); !slices.Equal(got, []string{"n1.1"}) {
		t.Fatalf("the new incarnation's copy: watches %v, want n1.1", got)
	}
	reply, _ := finishTree(t, r, append(fx.Tasks(), back.Tasks()...))
	mustReduce(t, reply, []string{"s2", "s3"}, []string{"s0", "s1"})
}

// The same for a source that was never located before its node failed:
// a plain Reduce must not place it on the dead node (a task there is
// never answered; the Reduce waited for its deadline).
func TestLateLocationOfAFailedNodeIsNotPlaced(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c"}, 2), Config{ForceDegree: 1})
	r.Begin(t0)
	r.Located(completeAt("a", node(1)), t0)
	r.NodeFailed("n3", t0) // the shell heard of it: n3 had nothing the Reduce knew of
	if fx := r.Located(completeAt("c", node(3)), t0); !isEmpty(fx) || len(fx.Watch) != 0 {
		t.Fatalf("a location of the failed n3 was taken: %+v", fx)
	}
	fx := r.Located(completeAt("b", node(2)), t0)
	if len(fx.Tasks()) == 0 {
		t.Fatalf("b arrived: no task")
	}
	for _, tk := range fx.Tasks() {
		if tk.Node.GetNodeId() == "n3" || tk.Task.GetSourceId() == "c" {
			t.Fatalf("a task on the failed n3 or of its source: %v on %s", tk.Task, tk.Node.GetNodeId())
		}
	}
	if got := r.Waiting(); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("waiting for %v, want c (it may be Put again)", got)
	}
}
