package reduction

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The shapes other than the tree that create the target at its directory
// shard take an UNAVAILABLE from that creation, before the result is
// fixed, for a shard move as the tree's root does
// (TestRootThatCannotCreateTheTargetIsAShardMove): the shard that answers
// is not the one the coordinator reserved the target in. Answered as the
// Reduce's failure, the caller would get UNAVAILABLE for a Reduce its
// node can simply start again at the shard's home.

var shardMoved = messages.Errorf(messages.ErrorCode_UNAVAILABLE,
	"object %q: this directory shard holds no reservation for reduce %s", testTarget, testReduceID)

// The inline result's store (StoreReduced) is its target's creation: the
// caller's node's for a Reduce, the coordinator's member's for an
// AllReduce. Any other refusal of the store is the Reduce's failure.
func TestInlineResultThatCannotBeStoredIsAShardMove(t *testing.T) {
	for _, c := range []struct {
		name      string
		allReduce bool
		err       *messages.Error
		kind      error
		retry     bool
	}{
		{"reduce UNAVAILABLE", false, shardMoved, messages.ErrUnavailable, true},
		{"allreduce UNAVAILABLE", true, shardMoved, messages.ErrUnavailable, true},
		{"reduce INVALID_ARGUMENT", false, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "not reserved"), messages.ErrInvalidArgument, false},
		{"allreduce CAPACITY", true, messages.Errorf(messages.ErrorCode_CAPACITY, "full"), messages.ErrCapacity, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := request([]string{"a", "b"}, 2)
			req.Dtype, req.AllReduce = messages.DType_INT32, c.allReduce
			r := NewReductionFor(testReduceID, req, node(9), Config{InlineLimit: testInline}, t0, time.Second, 100*time.Microsecond, 1.25e9)
			mustEmpty(t, "a", r.Step(t0, locatedInline("a", le32(1, 2), node(0))))
			if fx := r.Step(t0, locatedInline("b", le32(10, 20), node(1))); fx.StoreInline() == nil {
				t.Fatalf("want the result's store, got %+v", fx)
			}
			fx := r.Step(t0, &messages.StoreReducedReply{ReduceId: testReduceID, Error: c.err})
			// Nothing ran on a node, so nothing is released there; the
			// target's reservation is, at the shard that made it.
			mustFail(t, r, fx, c.kind, nil)
			if got := fx.Reply().GetShardStopped(); got != c.retry {
				t.Fatalf("shard_stopped %v, want %v (reply %v)", got, c.retry, fx.Reply())
			}
		})
	}
}

// A sliced AllReduce's creator gather (the caller's node's, position n·n
// here) creates the target; its UNAVAILABLE start is a shard move, which
// still drops every gather's copy. Another gather's, or a chain
// position's, UNAVAILABLE start creates nothing at the shard: the
// AllReduce's failure, as is the creator gather's failed end.
func TestSlicedCreatorGatherThatCannotCreateTheTargetIsAShardMove(t *testing.T) {
	const n = 3
	for _, ring := range []bool{false, true} {
		for _, c := range []struct {
			name  string
			pos   func(creator, other int) int // the position that fails
			done  bool                         // fails in its end report, not its start
			err   *messages.Error
			kind  error
			retry bool
		}{
			{"creator gather UNAVAILABLE", func(creator, _ int) int { return creator }, false, shardMoved, messages.ErrUnavailable, true},
			{"creator gather INVALID_ARGUMENT", func(creator, _ int) int { return creator }, false,
				messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "not reserved"), messages.ErrInvalidArgument, false},
			{"creator gather ends UNAVAILABLE", func(creator, _ int) int { return creator }, true, shardMoved, messages.ErrUnavailable, false},
			{"other gather UNAVAILABLE", func(_, other int) int { return other }, false, shardMoved, messages.ErrUnavailable, false},
			{"chain root UNAVAILABLE", func(int, int) int { return n - 1 }, false, shardMoved, messages.ErrUnavailable, false},
		} {
			t.Run(fmt.Sprintf("ring=%v/%s", ring, c.name), func(t *testing.T) {
				r := newRed(allReduceRequest(ids("s", n)), Config{AllReduceShape: ShapeSliced, NoRingGather: !ring})
				r.start = node(2) // the caller's node holds s2: its gather creates the target
				r.Step(t0, Begin{})
				var tasks []Task
				for i := 0; i < n; i++ {
					tasks = append(tasks, r.Step(t0, located(fmt.Sprintf("s%d", i), bigSize, node(i))).Tasks()...)
				}
				if r.plan.GetShape() != ShapeSliced || r.plan.GetRingGather() != ring {
					t.Fatalf("plan %v, want sliced (ring gather %v)", r.plan, ring)
				}
				creator, other := -1, -1
				for _, tk := range tasks {
					switch {
					case tk.Task.GetGather() && tk.Task.GetRoot():
						creator = int(tk.Task.GetPosition())
						if tk.Node.GetNodeId() != "n2" {
							t.Fatalf("the creator gather is on %s, want the caller's n2", tk.Node.GetNodeId())
						}
					case tk.Task.GetGather():
						other = int(tk.Task.GetPosition())
					}
				}
				if creator < 0 || other < 0 {
					t.Fatalf("no creator gather and other gather among %v", tasks)
				}
				p := c.pos(creator, other)
				var fx Effects
				if c.done {
					mustEmpty(t, "started", r.Step(t0, started(p)))
					fx = r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: int32(p), Generation: 1, Error: c.err})
				} else {
					fx = r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: int32(p), Generation: 1, Error: c.err})
				}
				mustFail(t, r, fx, c.kind, []string{"n0", "n1", "n2"})
				if got := fx.Reply().GetShardStopped(); got != c.retry {
					t.Fatalf("position %d: shard_stopped %v, want %v (reply %v)", p, got, c.retry, fx.Reply())
				}
				// Every gather may hold a copy the directory does not know:
				// the next attempt must not find one.
				var dropped []string
				for _, s := range fx.Sends {
					if _, ok := s.Msg.(*messages.DropObject); ok {
						dropped = append(dropped, s.To.(*messages.NodeRef).GetNodeId())
					}
				}
				if slices.Sort(dropped); !slices.Equal(dropped, []string{"n0", "n1", "n2"}) {
					t.Fatalf("dropped the target on %v, want every gather's node", dropped)
				}
			})
		}
	}
}
