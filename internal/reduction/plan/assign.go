package plan

import (
	"container/heap"
	"errors"
	"fmt"
)

// ErrDuplicate reports an object that arrives while it is already placed
// or waiting as a backup; accepting it would reduce it twice.
var ErrDuplicate = errors.New("plan: object already arrived")

// ErrUnknown reports a failure for an object the assignment does not
// hold; it usually means the failure was already handled.
var ErrUnknown = errors.New("plan: unknown object")

// ErrEmptyID rejects the empty id, which Holder uses to mean "open".
var ErrEmptyID = errors.New("plan: empty object id")

// Assignment places objects into a Tree as they become ready and repairs
// the placement when a holder fails. It is a plain state machine, not
// safe for concurrent use: the reduce coordinator owns it and serialises
// events through its mailbox.
//
// The invariant it keeps is that exactly min(n, live) positions are
// filled, where live counts the objects that arrived and have not failed:
// a position never stays open while a backup waits, which is what lets a
// Reduce of n out of m succeed whenever n sources can be created.
type Assignment struct {
	tree    *Tree
	holder  []string
	pos     map[string]int
	backups []string
	backup  map[string]bool
	open    openHeap
	filled  int
}

// Replacement is what the coordinator must do after a failure.
type Replacement struct {
	// Pos is the failed object's position, or -1 when it was only a backup
	// and nothing in the tree changes.
	Pos int
	// NewID is the backup now holding Pos, or "" when none was waiting
	// and Pos stays open for the next arrival.
	NewID string
	// Invalidate lists Pos's ancestors, parent first: their partial
	// results contain the failed object and must be cleared and pulled
	// again. Pos's descendants keep theirs, since they never saw it.
	Invalidate []int
}

// NewAssignment starts with every position of t open and no backups.
func NewAssignment(t *Tree) *Assignment {
	a := &Assignment{
		tree:   t,
		holder: make([]string, t.N()),
		pos:    make(map[string]int),
		backup: make(map[string]bool),
		open:   make(openHeap, t.N()),
	}
	// Ascending order already satisfies the heap property.
	for p := range a.open {
		a.open[p] = p
	}
	return a
}

// Tree is the shape this assignment fills.
func (a *Assignment) Tree() *Tree { return a.tree }

// Arrive records that object id is ready. It takes the lowest open
// position, so initial arrivals follow in-order and a hole left by a
// failure is refilled before later positions: lower positions belong to
// subtrees that are closer to complete. Once every position is held the
// object becomes a backup (placed false, pos -1).
//
// An id may arrive again after Replace removed it (a recovered task
// recreating its object), but not while it is placed or a backup.
func (a *Assignment) Arrive(id string) (pos int, placed bool, err error) {
	if id == "" {
		return -1, false, ErrEmptyID
	}
	if _, ok := a.pos[id]; ok || a.backup[id] {
		return -1, false, fmt.Errorf("%w: %q", ErrDuplicate, id)
	}
	if a.open.Len() == 0 {
		a.backup[id] = true
		a.backups = append(a.backups, id)
		return -1, false, nil
	}
	p := heap.Pop(&a.open).(int)
	a.place(p, id)
	return p, true, nil
}

func (a *Assignment) place(p int, id string) {
	a.holder[p] = id
	a.pos[id] = p
	a.filled++
}

// Replace removes the failed object failedID. If it held a position, the
// earliest-arrived backup takes that position (or it stays open for the
// next arrival) and the ancestors are returned for invalidation. A failed
// backup is simply dropped so it is never placed later.
func (a *Assignment) Replace(failedID string) (Replacement, error) {
	p, ok := a.pos[failedID]
	if !ok {
		if !a.backup[failedID] {
			return Replacement{Pos: -1}, fmt.Errorf("%w: %q", ErrUnknown, failedID)
		}
		delete(a.backup, failedID)
		for i, id := range a.backups {
			if id == failedID {
				a.backups = append(a.backups[:i:i], a.backups[i+1:]...)
				break
			}
		}
		return Replacement{Pos: -1}, nil
	}
	delete(a.pos, failedID)
	a.holder[p] = ""
	a.filled--
	r := Replacement{Pos: p, Invalidate: a.tree.Ancestors(p)}
	if len(a.backups) > 0 {
		id := a.backups[0]
		a.backups = a.backups[1:]
		delete(a.backup, id)
		a.place(p, id)
		r.NewID = id
	} else {
		heap.Push(&a.open, p)
	}
	return r, nil
}

// Holder is the object at pos, or "" while pos is open.
func (a *Assignment) Holder(pos int) string { return a.holder[pos] }

// Position is where id is placed, or -1 if it is not in the tree; the
// coordinator uses it to map a failure report to a tree node.
func (a *Assignment) Position(id string) int {
	if p, ok := a.pos[id]; ok {
		return p
	}
	return -1
}

// Ready reports whether every position in the subtree rooted at pos is
// held, i.e. whether pos's holder can produce its full partial result.
func (a *Assignment) Ready(pos int) bool {
	lo, hi := a.tree.Span(pos)
	for p := lo; p <= hi; p++ {
		if a.holder[p] == "" {
			return false
		}
	}
	return true
}

// Complete reports whether all n positions are held, the condition for
// the root's result to be the final one.
func (a *Assignment) Complete() bool { return a.filled == a.tree.N() }

// Placed lists the held ids ordered by position, skipping open positions;
// Holder gives the positional view.
func (a *Assignment) Placed() []string {
	out := make([]string, 0, a.filled)
	for _, id := range a.holder {
		if id != "" {
			out = append(out, id)
		}
	}
	return out
}

// Backups lists the waiting objects in arrival order, the order in which
// failures will consume them.
func (a *Assignment) Backups() []string {
	return append([]string(nil), a.backups...)
}

// openHeap is a min-heap of open positions, so the lowest is reused first.
type openHeap []int

func (h openHeap) Len() int           { return len(h) }
func (h openHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h openHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *openHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *openHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
