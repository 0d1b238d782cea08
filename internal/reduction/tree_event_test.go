package reduction

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// treeOf returns the last ReduceTree event of fx, or nil.
func treeOf(fx Effects) *events.ReduceTree {
	var out *events.ReduceTree
	for _, e := range fx.Events {
		if t, ok := e.(*events.ReduceTree); ok {
			out = t
		}
	}
	return out
}

// TestReduceTreeEvents: the coordinator publishes the tree as it forms
// (each arrival in its position, on its node), as a failure repairs it
// (the lost position refilled by a backup), and only when it changed.
func TestReduceTreeEvents(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c"}, 2), Config{ForceDegree: 1})
	ev := treeOf(r.Step(t0, located("a", bigSize, node(0))))
	if ev == nil || ev.Num != 2 || ev.Degree != 1 || ev.Target == "" || len(ev.Positions) != 2 {
		t.Fatalf("first arrival: tree %+v", ev)
	}
	placed := 0
	for _, p := range ev.Positions {
		if p.Object == "a" && p.Node == "n0" {
			placed++
		} else if p.Object != "" || p.State != "open" {
			t.Fatalf("first arrival: position %+v, want open", p)
		}
	}
	if placed != 1 {
		t.Fatalf("first arrival: a is not placed on n0: %+v", ev.Positions)
	}
	if ev := treeOf(r.Step(t0, located("a", bigSize, node(0)))); ev != nil {
		t.Fatalf("a repeated location changed nothing, yet a tree was published: %+v", ev)
	}
	ev = treeOf(r.Step(t0, located("b", bigSize, node(1))))
	if ev == nil {
		t.Fatal("second arrival: no tree")
	}
	bPos := -1
	for _, p := range ev.Positions {
		if p.Object == "" {
			t.Fatalf("second arrival: an open position %+v", p)
		}
		if p.Object == "b" {
			bPos = p.Position
		}
	}
	// c arrives as a backup; b's node fails: c takes b's position.
	r.Step(t0, located("c", bigSize, node(2)))
	ev = treeOf(r.Step(t0, NodeFailed{Node: "n1"}))
	if ev == nil || bPos < 0 {
		t.Fatalf("repair: no tree (b at %d)", bPos)
	}
	if p := ev.Positions[bPos]; p.Object != "c" || p.Node != "n2" {
		t.Fatalf("repair: position %d is %+v, want c on n2", bPos, p)
	}
}

// TestLargeTreeEventsAreSpaced: a tree of more than TreeEventEvery
// positions publishes its first state, then nothing more within
// TreeEventGap of the steps' clock however much changes (each event is
// a snapshot of every position), then its latest state at the first
// step after the gap, and its answer's whatever the time.
func TestLargeTreeEventsAreSpaced(t *testing.T) {
	n := 2 * TreeEventEvery
	srcs := ids("s", n)
	r := newRed(request(srcs, n), Config{ForceDegree: 1})
	if ev := treeOf(r.Step(t0, located(srcs[0], bigSize, node(0)))); ev == nil || len(ev.Positions) != n {
		t.Fatalf("first arrival: tree %+v, want one of %d positions", ev, n)
	}
	for i := 1; i < n-1; i++ {
		if ev := treeOf(r.Step(t0.Add(TreeEventGap/2), located(srcs[i], bigSize, node(i)))); ev != nil {
			t.Fatalf("arrival %d within the gap published a tree", i)
		}
	}
	fx := r.Step(t0.Add(TreeEventGap), located(srcs[n-1], bigSize, node(n-1)))
	ev := treeOf(fx)
	if ev == nil {
		t.Fatal("the step after the gap published nothing")
	}
	for _, p := range ev.Positions {
		if p.Object == "" {
			t.Fatalf("after the gap: position %d still open, want every arrival placed", p.Position)
		}
	}
	var root *messages.ReduceTask
	for _, s := range fx.Sends {
		if tb, ok := s.Msg.(*messages.ReduceTaskBatch); ok {
			for _, tk := range tb.GetTasks() {
				if tk.GetRoot() {
					root = tk
				}
			}
		}
		if tk, ok := s.Msg.(*messages.ReduceTask); ok && tk.GetRoot() {
			root = tk
		}
	}
	if root == nil {
		t.Fatal("every source arrived, yet no root task went out")
	}
	at := t0.Add(TreeEventGap + time.Millisecond)
	r.Step(at, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: root.GetPosition(), Generation: root.GetGeneration()})
	ev = treeOf(r.Step(at, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: root.GetPosition(), Generation: root.GetGeneration()}))
	if ev == nil || !ev.Done {
		t.Fatalf("the answer's step, within the gap: tree %+v, want the answered tree", ev)
	}
}
