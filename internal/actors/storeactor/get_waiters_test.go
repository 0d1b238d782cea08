package storeactor

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
)

// Waiting Gets register one notice per object however many come and go;
// a notice that finds the object rewound (not settled) registers again;
// a settled object hands over every waiter with its error.
func TestGetWaitersOneNoticePerObject(t *testing.T) {
	store := objstore.NewStore(1 << 10)
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
	if n := obj.SettleNotices(); n != 1 {
		t.Fatalf("%d notices registered on the object, want 1", n)
	}
	// The notice fires as the object completes, and a rewind (a Reduce
	// repairing its tree) unsettles it before the store node handles it.
	if _, err := store.Allocate(obj, 4, 0); err != nil {
		t.Fatal(err)
	}
	w := obj.NewWriter()
	if err := w.Append([]byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(obj); err != nil {
		t.Fatal(err)
	}
	if notices != 1 || obj.SettleNotices() != 0 {
		t.Fatalf("completion fired %d notices, %d still registered; want 1 and 0", notices, obj.SettleNotices())
	}
	if err := obj.NewWriter().Rewind(); err != nil {
		t.Fatal(err)
	}
	if ws, _ := g.settle(obj, notify); ws != nil || obj.SettleNotices() != 1 {
		t.Fatalf("a notice for an unsettled object handed over %d waiters, %d notices", len(ws), obj.SettleNotices())
	}
	store.Abort(obj, messages.Errorf(messages.ErrorCode_LOST, "gone"))
	if notices != 2 {
		t.Fatalf("%d notices fired, want 2", notices)
	}
	ws, err := g.settle(obj, notify)
	if len(ws) != 1 || ws[0] != a || !errors.Is(err, messages.ErrLost) {
		t.Fatalf("settle: %d waiters, %v", len(ws), err)
	}
}

// A store node parks a bounded number of Gets from one other process,
// and in all; a waiter that leaves (answered or expired) frees its place,
// and this process's own callers count only in the total.
func TestGetWaitersBounded(t *testing.T) {
	store := objstore.NewStore(1 << 10)
	obj, _ := store.Reserve("x")
	g := newGetWaiters()
	peer := "10.0.0.9:7001"
	var ws []*waitingGet
	for range maxWaitingGetsPerSource {
		if err := g.admit(peer); err != nil {
			t.Fatalf("refused below the bound: %v", err)
		}
		w := &waitingGet{source: peer}
		g.add(obj, w, func() {})
		ws = append(ws, w)
	}
	err := g.admit(peer)
	if !errors.Is(err, messages.ErrResourceExhausted) {
		t.Fatalf("past the bound per source: %v, want RESOURCE_EXHAUSTED", err)
	}
	if g.admit("10.0.0.10:7001") != nil || g.admit("") != nil {
		t.Fatal("another source, or this process, refused because of one peer")
	}
	g.remove(obj, ws[0])
	if err := g.admit(peer); err != nil {
		t.Fatalf("a place freed by an expired Get: %v", err)
	}
	for g.total < maxWaitingGets {
		g.add(obj, &waitingGet{}, func() {})
	}
	if err := g.admit(""); !errors.Is(err, messages.ErrResourceExhausted) {
		t.Fatalf("past the total bound: %v, want RESOURCE_EXHAUSTED", err)
	}
	// Every waiter on a settled object leaves at once.
	if _, err := store.Allocate(obj, 1, 0); err != nil {
		t.Fatal(err)
	}
	w := obj.NewWriter()
	if err := w.Append([]byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(obj); err != nil {
		t.Fatal(err)
	}
	g.settle(obj, func() {})
	if g.total != 0 || len(g.bySource) != 0 {
		t.Fatalf("after settle: %d waiting, %d sources counted", g.total, len(g.bySource))
	}
}
