package reduction

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// These tests are about what a Reduction learns of sources that are gone:
// locations of a node whose failure it applied (sent before the failure,
// delivered after it), and the directory's word that a source has no copy
// left (LocationUpdate.error LOST).

// lostUpdate is the directory's notice that id's last copy is gone.
func lostUpdate(id string) *messages.LocationUpdate {
	return &messages.LocationUpdate{ObjectId: id, Error: messages.Errorf(messages.ErrorCode_LOST, "object %q is lost", id)}
}

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

// lastCopyFailed is the failure of node with the last copy of source id:
// the coordinator hears of the failure, then the shard's LOST. It
// returns both steps' effects.
func lastCopyFailed(r *Reduction, node, id string) Effects {
	fx := r.Step(t0, NodeFailed{Node: node})
	more := r.Step(t0, lostUpdate(id))
	fx.Sends = append(fx.Sends, more.Sends...)
	fx.Events = append(fx.Events, more.Events...)
	fx.Watch = append(fx.Watch, more.Watch...)
	return fx
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
	r.Step(t0, Begin{})
	for i := 0; i < 4; i++ {
		r.Step(t0, completeAt(fmt.Sprintf("s%d", i), node(i)))
	}
	// n0 held the last copy of s0: the shard says so after its failure.
	if ev := replanned(lastCopyFailed(r, "n0", "s0")); ev == nil || ev.Num != 3 {
		t.Fatalf("n0 failed with s0's last copy: replan %+v, want n lowered to 3", ev)
	}
	// The shard sent s0's location on n0 before it heard n0 failed.
	fx := r.Step(t0, completeAt("s0", node(0)))
	if !isEmpty(fx) || len(fx.Watch) != 0 || len(fx.Events) != 0 {
		t.Errorf("a location of the failed n0 was taken: %+v", fx)
	}
	fx = lastCopyFailed(r, "n1", "s1")
	if ev := replanned(fx); ev == nil || ev.Num != 2 || !slices.Equal(ev.Lost, []string{"s1"}) {
		t.Fatalf("n1 failed: replan %+v, want n lowered to 2 without s1", ev)
	}
	if on := tasksOn(fx, "n0"); len(on) != 0 {
		t.Fatalf("positions %v tasked on the failed n0", on)
	}
	// A member that starts again at n1's address is a new incarnation
	// with a new id: its copy of s1 counts (a backup now).
	again := &messages.NodeRef{NodeId: "n1.1", Address: node(1).GetAddress(), ActorId: node(1).GetActorId()}
	back := r.Step(t0, completeAt("s1", again))
	if got := nodeIDs(back.Watched()); !slices.Equal(got, []string{"n1.1"}) {
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
	r.Step(t0, Begin{})
	r.Step(t0, completeAt("a", node(1)))
	r.Step(t0, NodeFailed{Node: "n3"}) // the shell heard of it: n3 had nothing the Reduce knew of
	if fx := r.Step(t0, completeAt("c", node(3))); !isEmpty(fx) || len(fx.Watch) != 0 {
		t.Fatalf("a location of the failed n3 was taken: %+v", fx)
	}
	fx := r.Step(t0, completeAt("b", node(2)))
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

// A source the directory reports lost before it was ever located lowers
// an AllReduce's n as the failure of a participant holding it would: the
// survivors get the reduction of the sources that still exist, instead
// of a wait for the deadline. In a tree and in a sliced run, which needs
// every source, and before anything arrived (the first arrival plans for
// the lowered n).
func TestSourceLostBeforeItWasLocated(t *testing.T) {
	for _, tc := range []struct {
		name    string
		shape   string
		arrived int
	}{
		{"d-ary", ShapeDAry, 2},
		{"sliced", ShapeSliced, 2},
		{"nothing arrived yet", ShapeSliced, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRed(allReduceRequest(ids("s", 3)), Config{AllReduceShape: tc.shape})
			r.start = node(9)
			r.Step(t0, Begin{})
			var tasks []Task
			for i := 0; i < tc.arrived; i++ {
				tasks = append(tasks, r.Step(t0, completeAt(fmt.Sprintf("s%d", i), node(i))).Tasks()...)
			}
			fx := r.Step(t0, lostUpdate("s2"))
			if fx.Reply() != nil {
				t.Fatalf("the AllReduce answered: %v", fx.Reply())
			}
			ev := replanned(fx)
			if ev == nil || ev.Num != 2 || !slices.Equal(ev.Lost, []string{"s2"}) || ev.Node != "" {
				t.Fatalf("s2 lost: replan %+v, want n lowered to 2 without s2", ev)
			}
			if r.req.GetNumObjects() != 2 {
				t.Fatalf("num_objects %d, want 2", r.req.GetNumObjects())
			}
			tasks = fx.Tasks() // the re-planned tree's: the old run's are abandoned
			for i := tc.arrived; i < 2; i++ {
				tasks = append(tasks, r.Step(t0, completeAt(fmt.Sprintf("s%d", i), node(i))).Tasks()...)
			}
			if r.plan.GetShape() != ShapeDAry {
				t.Fatalf("shape %q, want the tree", r.plan.GetShape())
			}
			// The directory repeats it to every resubscription: nothing
			// changes.
			if fx := r.Step(t0, lostUpdate("s2")); !isEmpty(fx) || replanned(fx) != nil {
				t.Fatalf("s2 reported lost again: %+v", fx)
			}
			reply, _ := finishTree(t, r, tasks)
			mustReduce(t, reply, []string{"s0", "s1"}, []string{"s2"})
		})
	}
}

// A located source reported lost (its copy's node died, and the shard
// said so before the coordinator heard of the failure) is lost as if
// that node had failed; the failure, heard next, changes nothing more.
func TestLocatedSourceReportedLost(t *testing.T) {
	r := newRed(allReduceRequest(ids("s", 3)), Config{AllReduceShape: ShapeDAry})
	r.start = node(9)
	r.Step(t0, Begin{})
	for i := 0; i < 3; i++ {
		r.Step(t0, completeAt(fmt.Sprintf("s%d", i), node(i)))
	}
	fx := r.Step(t0, lostUpdate("s2"))
	if ev := replanned(fx); ev == nil || ev.Num != 2 || ev.Node != "n2" {
		t.Fatalf("s2 lost: replan %+v, want n lowered to 2, the loss named after s2's node n2", ev)
	}
	for _, tk := range fx.Tasks() {
		if tk.Task.GetSourceId() == "s2" || tk.Node.GetNodeId() == "n2" {
			t.Fatalf("a task still uses s2: %v on %s", tk.Task, tk.Node.GetNodeId())
		}
	}
	tasks := fx.Tasks()
	if more := r.Step(t0, NodeFailed{Node: "n2"}); replanned(more) != nil || len(more.Tasks()) != 0 {
		t.Fatalf("n2's failure after s2 was lost: %+v", more)
	}
	reply, _ := finishTree(t, r, tasks)
	mustReduce(t, reply, []string{"s0", "s1"}, []string{"s2"})
}

// Every source lost: the AllReduce fails at once.
func TestEverySourceLost(t *testing.T) {
	r := newRed(allReduceRequest(ids("s", 2)), Config{})
	r.start = node(9)
	r.Step(t0, Begin{})
	r.Step(t0, completeAt("s0", node(0)))
	if fx := r.Step(t0, lostUpdate("s1")); fx.Reply() != nil {
		t.Fatalf("one of two sources lost: %v", fx.Reply())
	}
	fx := r.Step(t0, lostUpdate("s0"))
	if !errorsIs(fx.Reply(), messages.ErrUnavailable) || !fx.ReleaseTarget() {
		t.Fatalf("reply %v, release target %v: want UNAVAILABLE and the target freed", fx.Reply(), fx.ReleaseTarget())
	}
}

// A plain Reduce treats a lost source as its node's failure does: a
// placed one leaves its position for the ready backup; one not located
// is waited for while enough others can make up n (it may be Put again).
func TestReduceSourceLost(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c", "d"}, 2), Config{ForceDegree: 1})
	r.Step(t0, Begin{})
	r.Step(t0, completeAt("a", node(1)))
	r.Step(t0, completeAt("b", node(2)))
	r.Step(t0, completeAt("c", node(3))) // a backup
	if fx := r.Step(t0, lostUpdate("d")); !isEmpty(fx) || len(fx.Events) != 0 {
		t.Fatalf("a source never located was lost: %+v", fx)
	}
	fx := r.Step(t0, lostUpdate("b"))
	var rep *events.TreeNodeReplaced
	for _, e := range fx.Events {
		if ev, ok := e.(*events.TreeNodeReplaced); ok {
			rep = ev
		}
	}
	if rep == nil || rep.Failed != "b" || rep.Replacement != "c" {
		t.Fatalf("b lost: events %v, want b replaced by c", fx.Events)
	}
	for _, tk := range fx.Tasks() {
		if tk.Task.GetSourceId() == "b" || slices.ContainsFunc(tk.Task.GetChildren(), func(in *messages.ReduceInput) bool { return in.GetObjectId() == "b" }) {
			t.Fatalf("a task still reads b: %v", tk.Task)
		}
	}
	// b is Put again: it arrives as any source does.
	if got := nodeIDs(r.Step(t0, completeAt("b", node(5))).Watched()); !slices.Equal(got, []string{"n5"}) {
		t.Fatalf("b Put again on n5: watches %v", got)
	}
}

// While a knee policy gates the tree, a lost arrival no longer counts as
// available, as one whose node failed.
func TestKneePhaseSourceLost(t *testing.T) {
	r := kneeRed(4, &messages.ReduceKnee{MinPercent: 100})
	r.Step(t0, Begin{})
	r.Step(t0, completeAt("s0", node(0)))
	r.Step(t0, completeAt("s1", node(1)))
	r.Step(t0, lostUpdate("s1"))
	if len(r.knee.pending) != 1 || r.knee.pending[0].GetObjectId() != "s0" {
		t.Fatalf("pending %v, want s0 alone", r.knee.pending)
	}
}

// A plain Reduce whose lost sources leave fewer than n that can take
// part fails at once with LOST, naming them, instead of waiting for them
// until its deadline and answering TIMEOUT: located or not, a lost
// source takes part again only if a new copy of it arrives (it is Put
// again), which before the failure makes it possible again.
func TestReduceFailsWithLostOnceTooFewSourcesCanTakePart(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c", "d"}, 3), Config{ForceDegree: 1})
	r.Step(t0, Begin{})
	r.Step(t0, completeAt("a", node(1)))
	r.Step(t0, completeAt("b", node(2)))
	if fx := r.Step(t0, lostUpdate("c")); fx.Reply() != nil {
		t.Fatalf("c lost, a, b and d can make up 3: %v", fx.Reply())
	}
	// c is Put again: possible once more; then d is lost.
	r.Step(t0, completeAt("c", node(3)))
	if fx := r.Step(t0, lostUpdate("d")); fx.Reply() != nil {
		t.Fatalf("d lost after c came back: %v", fx.Reply())
	}
	fx := r.Step(t0, lostUpdate("b"))
	err := mustFail(t, r, fx, messages.ErrLost, nodeIDs(fx.Release()))
	if msg := err.GetMessage(); !strings.Contains(msg, "b, d") {
		t.Fatalf("the failure %q does not name the lost sources b and d", msg)
	}
}

// An AllReduce participant that fails takes its copy of its source, not
// the source, when another member holds a whole copy (a Get made it):
// the AllReduce reduces every source, taking that one from the other
// copy, instead of lowering n as for a lost source. It lowered n: a
// sliced MIN of 3 whose third source was still to be Put answered (and
// committed) the reduction of 2, one of them never lost (chaos seed
// 5000349).
func TestAllReduceParticipantFailedWithACopyElsewhere(t *testing.T) {
	for _, shape := range []string{ShapeSliced, ShapeDAry} {
		for _, running := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/running=%v", shape, running), func(t *testing.T) {
				r := newRed(allReduceRequest(ids("s", 3)), Config{AllReduceShape: shape})
				r.start = node(9)
				r.Step(t0, Begin{})
				var tasks []Task
				if running {
					tasks = append(tasks, r.Step(t0, completeAt("s0", node(0))).Tasks()...)
				}
				tasks = append(tasks, r.Step(t0, completeAt("s1", node(1))).Tasks()...)
				tasks = append(tasks, r.Step(t0, completeAt("s2", node(2))).Tasks()...)
				// A reader's copy of s2 on n5: the shard tells the subscriber,
				// which has s2 already.
				tasks = append(tasks, r.Step(t0, completeAt("s2", node(5))).Tasks()...)
				fx := r.Step(t0, NodeFailed{Node: "n2"})
				if fx.Reply() != nil || r.req.GetNumObjects() != 3 {
					t.Fatalf("n2 failed: reply %v, n %d; want no answer and n kept at 3", fx.Reply(), r.req.GetNumObjects())
				}
				var asked []string
				for _, s := range fx.Sends {
					if m, ok := s.Msg.(*messages.Subscribe); ok {
						asked = append(asked, m.GetObjectId())
					}
				}
				if !slices.Equal(asked, []string{"s2"}) {
					t.Fatalf("asked the shards again for %v, want s2", asked)
				}
				// The tasks n2 ran died with it; a sliced run that ran
				// re-planned, and the others stand.
				tasks = slices.DeleteFunc(tasks, func(tk Task) bool { return tk.Node.GetNodeId() == "n2" })
				if running && shape == ShapeSliced {
					tasks = nil
				}
				after := fx.Tasks()
				// The shard's answer: the dead copy (it had not heard of the
				// failure yet), then the reader's.
				after = append(after, r.Step(t0, completeAt("s2", node(2))).Tasks()...)
				after = append(after, r.Step(t0, completeAt("s2", node(5))).Tasks()...)
				if !running {
					after = append(after, r.Step(t0, completeAt("s0", node(0))).Tasks()...)
				}
				for _, tk := range after {
					if tk.Node.GetNodeId() == "n2" {
						t.Fatalf("a task on the failed n2: %v", tk.Task)
					}
				}
				reply := finishAny(t, r, append(tasks, after...))
				mustReduce(t, reply, []string{"s0", "s1", "s2"}, nil)
			})
		}
	}
}

// finishAny runs the tasks of a sliced run or a tree, and any they lead
// to, to the end: every position starts, then each reports done in
// position order, then every participant's Get of the result ends. It
// returns the reply.
func finishAny(t *testing.T, r *Reduction, tasks []Task) *messages.ReduceReply {
	t.Helper()
	var reply *messages.ReduceReply
	var fetch []string
	take := func(fx Effects) {
		if rep := fx.Reply(); rep != nil {
			reply = rep
		}
		fetch = append(fetch, nodeIDs(fx.Fetch())...)
		tasks = append(tasks, fx.Tasks()...)
	}
	for i := 0; i < len(tasks); i++ {
		tk := tasks[i].Task
		take(r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: tk.GetPosition(), Generation: tk.GetGeneration()}))
	}
	for _, tk := range byPosition(tasks) {
		take(r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: tk.Task.GetPosition(), Generation: tk.Task.GetGeneration()}))
	}
	for i := 0; i < len(fetch); i++ {
		take(r.Step(t0, Fetched{Node: fetch[i], Err: nil}))
	}
	return reply
}

// An AllReduce whose result is committed (readers may have it whole)
// and that then fails, because a participant cannot hold a copy of it
// (CAPACITY) or its deadline passes while it waits for the participants'
// Gets, keeps the target: it answers the error, releases every node
// keeping the target, and neither releases it at its shard nor drops a
// copy. It released it as a failure's, and a Get that began after a
// reader had read the result waited for it until its deadline (chaos
// seed 5000288).
func TestAllReduceFailingAfterItsCommitKeepsTheTarget(t *testing.T) {
	for _, end := range []string{"a participant's Get fails", "the deadline"} {
		t.Run(end, func(t *testing.T) {
			r := newRed(allReduceRequest(ids("s", 3)), Config{AllReduceShape: ShapeDAry})
			r.start = node(9)
			r.Step(t0, Begin{})
			var tasks []Task
			for i := 0; i < 3; i++ {
				tasks = append(tasks, r.Step(t0, completeAt(fmt.Sprintf("s%d", i), node(i))).Tasks()...)
			}
			var fetch []string
			for _, tk := range tasks {
				fetch = append(fetch, nodeIDs(r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: tk.Task.GetPosition(), Generation: tk.Task.GetGeneration()}).Fetch())...)
			}
			var committed bool
			for _, tk := range byPosition(tasks) {
				fx := r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: tk.Task.GetPosition(), Generation: tk.Task.GetGeneration()})
				fetch = append(fetch, nodeIDs(fx.Fetch())...)
				for _, s := range fx.Sends {
					if c, ok := s.Msg.(*messages.ReduceCommit); ok && !c.GetMarkOnly() {
						committed = true
					}
				}
			}
			if !committed || r.reply == nil || len(fetch) == 0 {
				t.Fatalf("committed %v, result fixed %v, participants asked %v: want the result committed and Gets out", committed, r.reply != nil, fetch)
			}
			var fx Effects
			var want error
			if end == "the deadline" {
				fx, want = r.Step(r.Deadline(), DeadlineTimer{}), messages.ErrTimeout
			} else {
				fx, want = r.Step(t0, Fetched{Node: fetch[0], Err: messages.Errorf(messages.ErrorCode_CAPACITY, "full")}), messages.ErrCapacity
			}
			if !errorsIs(fx.Reply(), want) {
				t.Fatalf("reply %v, want %v", fx.Reply(), want)
			}
			if fx.ReleaseTarget() || !fx.ReleaseKeep() || len(fx.Release()) == 0 {
				t.Fatalf("release target %v, keep %v, releases %v: want every node released keeping the target", fx.ReleaseTarget(), fx.ReleaseKeep(), nodeIDs(fx.Release()))
			}
			for _, s := range fx.Sends {
				if d, ok := s.Msg.(*messages.DropObject); ok {
					t.Fatalf("dropped %s on %v", d.GetObjectId(), s.To)
				}
			}
		})
	}
}
