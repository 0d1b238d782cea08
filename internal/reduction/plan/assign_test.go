package plan

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"testing"
)

// TestFigure25b replays the thesis' Figure 2.5b: reduce 6 of 10, R1..R6
// are placed as in Figure 2.5a, R7 arrives as a backup, then R2 fails. R7
// takes R2's position and only R2's ancestor R4 must clear; R2's children
// R1, R3 and the other subtree R5, R6 keep their results.
func TestFigure25b(t *testing.T) {
	tr, _ := NewTree(6, 2)
	a := NewAssignment(tr)
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("R%d", i)
		pos, placed, err := a.Arrive(id)
		if err != nil || !placed || pos != i-1 {
			t.Fatalf("Arrive(%s) = %d, %v, %v; want %d, true, nil", id, pos, placed, err, i-1)
		}
		if a.Complete() != (i == 6) {
			t.Fatalf("after %s Complete() = %v", id, a.Complete())
		}
	}
	if !a.Ready(1) || !a.Ready(3) {
		t.Fatal("R2's and R4's subtrees should be ready")
	}
	if pos, placed, err := a.Arrive("R7"); err != nil || placed || pos != -1 {
		t.Fatalf("Arrive(R7) = %d, %v, %v; want backup", pos, placed, err)
	}
	if !slices.Equal(a.Backups(), []string{"R7"}) {
		t.Fatalf("Backups() = %v", a.Backups())
	}
	r, err := a.Replace("R2")
	if err != nil {
		t.Fatal(err)
	}
	if r.Pos != 1 || r.NewID != "R7" {
		t.Fatalf("Replace(R2) = %+v, want R7 at position 1", r)
	}
	var ids []string
	for _, p := range r.Invalidate {
		ids = append(ids, a.Holder(p))
	}
	if !slices.Equal(ids, []string{"R4"}) {
		t.Fatalf("invalidated %v, want exactly [R4]", ids)
	}
	want := []string{"R1", "R7", "R3", "R4", "R5", "R6"}
	if !slices.Equal(a.Placed(), want) || len(a.Backups()) != 0 || !a.Complete() {
		t.Fatalf("Placed() = %v Backups() = %v Complete() = %v", a.Placed(), a.Backups(), a.Complete())
	}
	// The rejoined R2 is a fresh arrival and becomes the next backup.
	if _, placed, err := a.Arrive("R2"); err != nil || placed {
		t.Fatalf("rejoining R2: placed %v err %v", placed, err)
	}
}

// A failure with no backup leaves a hole that the next arrival fills
// before any later position, and the hole makes its ancestors not ready.
func TestReplaceWithoutBackup(t *testing.T) {
	tr, _ := NewTree(7, 2)
	a := NewAssignment(tr)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		if _, _, err := a.Arrive(id); err != nil {
			t.Fatal(err)
		}
	}
	r, err := a.Replace("c")
	if err != nil {
		t.Fatal(err)
	}
	if r.Pos != 2 || r.NewID != "" || !slices.Equal(r.Invalidate, []int{1, 3}) {
		t.Fatalf("Replace(c) = %+v", r)
	}
	if a.Holder(2) != "" || a.Ready(1) || a.Ready(3) || !a.Ready(0) || !a.Ready(4) {
		t.Fatal("readiness wrong after the hole at position 2")
	}
	if pos, placed, _ := a.Arrive("f"); !placed || pos != 2 {
		t.Fatalf("Arrive(f) = %d, %v; want the hole 2", pos, placed)
	}
	if pos, placed, _ := a.Arrive("g"); !placed || pos != 5 {
		t.Fatalf("Arrive(g) = %d, %v; want 5", pos, placed)
	}
	if a.Position("f") != 2 || a.Position("c") != -1 {
		t.Fatalf("Position(f) = %d Position(c) = %d", a.Position("f"), a.Position("c"))
	}
}

func TestAssignmentErrors(t *testing.T) {
	tr, _ := NewTree(2, 2)
	a := NewAssignment(tr)
	if _, _, err := a.Arrive(""); !errors.Is(err, ErrEmptyID) {
		t.Fatalf("Arrive(\"\") error = %v", err)
	}
	a.Arrive("x")
	if _, _, err := a.Arrive("x"); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("placed twice: error = %v", err)
	}
	a.Arrive("y")
	a.Arrive("z") // backup
	if _, _, err := a.Arrive("z"); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("backup twice: error = %v", err)
	}
	if _, err := a.Replace("nope"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("Replace(unknown) error = %v", err)
	}
	if r, err := a.Replace("z"); err != nil || r.Pos != -1 || r.NewID != "" || len(r.Invalidate) != 0 {
		t.Fatalf("Replace(backup) = %+v, %v", r, err)
	}
	if _, err := a.Replace("z"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("second Replace(z) error = %v", err)
	}
	if !slices.Equal(a.Placed(), []string{"x", "y"}) || len(a.Backups()) != 0 {
		t.Fatalf("errors changed state: %v %v", a.Placed(), a.Backups())
	}
}

// TestAssignmentRandom drives random arrivals, failures and rejoins and
// checks the assignment against a simple model after every event.
func TestAssignmentRandom(t *testing.T) {
	for seed := int64(0); seed < 500; seed++ {
		rng := rand.New(rand.NewSource(seed))
		n := 1 + rng.Intn(20)
		d := []int{1, 2, 3, n}[rng.Intn(4)]
		var tr *Tree
		if rng.Intn(4) == 0 {
			tr, _ = NewChainLeafTree(n, 1+rng.Intn(n))
		} else {
			tr, _ = NewTree(n, d)
		}
		m := n + rng.Intn(10)
		a := NewAssignment(tr)

		var waiting []string        // sources not yet arrived (or failed, may rejoin)
		var live []string           // arrived and not failed, in arrival order
		failed := map[string]bool{} // currently failed
		for i := 0; i < m; i++ {
			waiting = append(waiting, fmt.Sprintf("o%d", i))
		}
		rng.Shuffle(len(waiting), func(i, j int) { waiting[i], waiting[j] = waiting[j], waiting[i] })

		for step := 0; step < 6*m; step++ {
			desc := fmt.Sprintf("seed %d n %d step %d", seed, n, step)
			switch {
			case len(waiting) > 0 && rng.Intn(3) > 0:
				id := waiting[0]
				waiting = waiting[1:]
				want := -1
				for p := 0; p < n; p++ {
					if a.Holder(p) == "" {
						want = p
						break
					}
				}
				pos, placed, err := a.Arrive(id)
				if err != nil || placed != (want >= 0) || pos != want {
					t.Fatalf("%s: Arrive(%s) = %d, %v, %v; want lowest open %d", desc, id, pos, placed, err, want)
				}
				delete(failed, id)
				live = append(live, id)
			case len(live) > 0:
				id := live[rng.Intn(len(live))]
				oldPos := a.Position(id)
				backups := a.Backups()
				r, err := a.Replace(id)
				if err != nil {
					t.Fatalf("%s: Replace(%s): %v", desc, id, err)
				}
				if r.Pos != oldPos {
					t.Fatalf("%s: Replace(%s).Pos = %d, was at %d", desc, id, r.Pos, oldPos)
				}
				if oldPos >= 0 {
					wantNew := ""
					if len(backups) > 0 {
						wantNew = backups[0]
					}
					if r.NewID != wantNew || a.Holder(oldPos) != wantNew {
						t.Fatalf("%s: replacement %q, want earliest backup %q", desc, r.NewID, wantNew)
					}
					if !slices.Equal(r.Invalidate, tr.Ancestors(oldPos)) {
						t.Fatalf("%s: Invalidate %v, want ancestors %v", desc, r.Invalidate, tr.Ancestors(oldPos))
					}
				} else if r.NewID != "" || len(r.Invalidate) != 0 {
					t.Fatalf("%s: failed backup produced %+v", desc, r)
				}
				live = slices.DeleteFunc(live, func(s string) bool { return s == id })
				failed[id] = true
				if rng.Intn(2) == 0 {
					waiting = append(waiting, id) // recovered task rejoins later
				}
			}
			if _, err := a.Replace("never-arrived"); !errors.Is(err, ErrUnknown) {
				t.Fatalf("%s: unknown Replace error = %v", desc, err)
			}
			checkModel(t, desc, a, n, live, failed)
		}
	}
}

func checkModel(t *testing.T, desc string, a *Assignment, n int, live []string, failed map[string]bool) {
	t.Helper()
	placed := a.Placed()
	seen := map[string]bool{}
	filled := 0
	for p := 0; p < n; p++ {
		id := a.Holder(p)
		if id == "" {
			continue
		}
		filled++
		if seen[id] {
			t.Fatalf("%s: %s placed twice", desc, id)
		}
		seen[id] = true
		if failed[id] {
			t.Fatalf("%s: failed %s still placed at %d", desc, id, p)
		}
		if a.Position(id) != p {
			t.Fatalf("%s: Position(%s) = %d, holder of %d", desc, id, a.Position(id), p)
		}
		if len(placed) < filled || placed[filled-1] != id {
			t.Fatalf("%s: Placed() = %v not in position order", desc, placed)
		}
	}
	if len(placed) != filled {
		t.Fatalf("%s: Placed() has %d ids, %d positions filled", desc, len(placed), filled)
	}
	if filled != min(n, len(live)) {
		t.Fatalf("%s: %d filled with %d live objects, want %d", desc, filled, len(live), min(n, len(live)))
	}
	if a.Complete() != (filled == n) {
		t.Fatalf("%s: Complete() = %v with %d of %d filled", desc, a.Complete(), filled, n)
	}
	var wantBackups []string
	for _, id := range live {
		if !seen[id] {
			wantBackups = append(wantBackups, id)
		}
	}
	if !slices.Equal(a.Backups(), wantBackups) {
		t.Fatalf("%s: Backups() = %v, want %v", desc, a.Backups(), wantBackups)
	}
	tr := a.Tree()
	for p := 0; p < n; p++ {
		lo, hi := tr.Span(p)
		want := true
		for q := lo; q <= hi; q++ {
			want = want && a.Holder(q) != ""
		}
		if a.Ready(p) != want {
			t.Fatalf("%s: Ready(%d) = %v, want %v", desc, p, a.Ready(p), want)
		}
	}
}
