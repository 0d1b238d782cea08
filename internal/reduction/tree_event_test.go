package reduction

import (
	"testing"

	"github.com/hoplite-go/hoplite/events"
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
