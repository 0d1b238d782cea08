package storenode

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// An object tells its settle notice once, when it completes or fails, and
// at once if it already has.
func TestOnSettledFiresOnce(t *testing.T) {
	store := NewStore(1 << 10)
	obj, _ := store.Reserve("x")
	calls := 0
	obj.OnSettled(func() { calls++ })
	if _, err := store.Allocate(obj, 4, 0); err != nil {
		t.Fatal(err)
	}
	w := obj.NewWriter()
	if err := w.Append([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("notified %d times before the object settled", calls)
	}
	if err := w.Append([]byte("cd")); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(obj); err != nil {
		t.Fatal(err)
	}
	store.Remove("x", messages.ErrDeleted)
	if calls != 1 {
		t.Fatalf("notified %d times, want once", calls)
	}
	obj.OnSettled(func() { calls++ })
	if calls != 2 {
		t.Fatal("a notice registered on a settled object did not fire at once")
	}
}

// Waiting Gets register one notice per object however many come and go;
// a notice that finds the object rewound (not settled) registers again;
// a settled object hands over every waiter with its error.
func TestGetWaitersOneNoticePerObject(t *testing.T) {
	store := NewStore(1 << 10)
	obj, _ := store.Reserve("x")
	g := newGetWaiters()
	notices := 0
	notify := func() { notices++ }
	a, b := &waitingGet{}, &waitingGet{}
	g.add(obj, a, notify)
	g.add(obj, b, notify)
	if !g.remove(obj, a) || g.remove(obj, a) {
		t.Fatal("remove: want true once, then false")
	}
	g.remove(obj, b)
	g.add(obj, a, notify) // after every waiter left, still one notice
	if len(obj.settled) != 1 {
		t.Fatalf("%d notices registered on the object, want 1", len(obj.settled))
	}
	obj.settled = nil // as if the notice fired and the object was rewound since
	if ws, _ := g.settle(obj, notify); ws != nil || len(obj.settled) != 1 {
		t.Fatalf("a notice for an unsettled object handed over %d waiters, %d notices", len(ws), len(obj.settled))
	}
	store.Abort(obj, messages.Errorf(messages.ErrorCode_LOST, "gone"))
	if notices != 1 {
		t.Fatalf("%d notices fired, want 1", notices)
	}
	ws, err := g.settle(obj, notify)
	if len(ws) != 1 || ws[0] != a || !errors.Is(err, messages.ErrLost) {
		t.Fatalf("settle: %d waiters, %v", len(ws), err)
	}
}
