package objstore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// pattern returns n deterministic bytes that differ per seed.
// cached puts a complete, unpinned (fetched) copy of size bytes in s.
func cached(t *testing.T, s *Store, id string, size int64) *Object {
	t.Helper()
	o, created := s.Reserve(id)
	if !created {
		t.Fatalf("Reserve(%q): already present", id)
	}
	if ev, err := s.Allocate(o, size, 0); err != nil || len(ev) != 0 {
		t.Fatalf("Allocate(%q, %d) = %v, %v; want no eviction", id, size, ev, err)
	}
	if err := o.Append(testutil.Pattern(byte(len(id)), int(size))); err != nil {
		t.Fatalf("Append(%q): %v", id, err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatalf("Complete(%q): %v", id, err)
	}
	return o
}

// reserveAlloc reserves a new placeholder and allocates it.
func reserveAlloc(t *testing.T, s *Store, id string, size int64) (*Object, []string, error) {
	t.Helper()
	o, created := s.Reserve(id)
	if !created {
		t.Fatalf("Reserve(%q): already present", id)
	}
	ev, err := s.Allocate(o, size, 0)
	return o, ev, err
}

func wantUsed(t *testing.T, s *Store, want int64) {
	t.Helper()
	if got := s.Used(); got != want {
		t.Fatalf("Used() = %d, want %d", got, want)
	}
}

// wantPresent checks ids are in s without touching their recency (Lookup
// would).
func wantPresent(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, o := range s.Objects() {
		have[o.ID()] = true
	}
	for _, id := range ids {
		if !have[id] {
			t.Fatalf("object %q missing from the store", id)
		}
	}
}

func TestStoreCreatePinsAndConflicts(t *testing.T) {
	s := NewStore(100)
	if s.Capacity() != 100 {
		t.Fatalf("Capacity() = %d", s.Capacity())
	}
	a, ev, err := s.Create("a", 60, 42)
	if err != nil || len(ev) != 0 {
		t.Fatalf("Create(a) = %v, %v", ev, err)
	}
	if !a.Pinned() || a.Size() != 60 || a.Fingerprint() != 42 || a.ID() != "a" {
		t.Fatalf("creator copy: pinned=%v size=%d fp=%d id=%q", a.Pinned(), a.Size(), a.Fingerprint(), a.ID())
	}
	wantUsed(t, s, 60)
	if err := a.Append(testutil.Pattern(1, 60)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(a); err != nil {
		t.Fatal(err)
	}
	// A complete, idle, pinned copy is still never evicted.
	_, _, err = s.Create("b", 50, 0)
	testutil.WantErr(t, err, messages.ErrCapacity)
	_, _, err = reserveAlloc(t, s, "c", 41)
	testutil.WantErr(t, err, messages.ErrCapacity)
	wantPresent(t, s, "a")
	wantUsed(t, s, 60)
	if _, _, err := a.Progress(); err != nil {
		t.Fatalf("pinned object failed: %v", err)
	}

	_, _, err = s.Create("a", 10, 0)
	testutil.WantErr(t, err, messages.ErrConflict)
	if s.Lookup("a") != a {
		t.Fatal("conflicting Create replaced the object")
	}
	// A fetched copy (placeholder) of the same id also conflicts.
	s.Reserve("p")
	_, _, err = s.Create("p", 1, 0)
	testutil.WantErr(t, err, messages.ErrConflict)

	_, _, err = s.Create("neg", -1, 0)
	testutil.WantErr(t, err, messages.ErrInvalidArgument)
	_, _, err = s.Create("huge", 101, 0)
	testutil.WantErr(t, err, messages.ErrCapacity)
	if s.Lookup("neg") != nil || s.Lookup("huge") != nil {
		t.Fatal("failed Create left an object behind")
	}
	wantUsed(t, s, 60)

	// After Delete the pinned copy is gone and the space is free.
	if !s.Remove("a", messages.ErrDeleted) {
		t.Fatal("Remove(a) = false")
	}
	wantUsed(t, s, 0)
	if _, _, err := s.Create("b", 100, 0); err != nil {
		t.Fatalf("Create(b) after Remove(a): %v", err)
	}
}

func TestStoreReservePlaceholder(t *testing.T) {
	s := NewStore(100)
	o, created := s.Reserve("x")
	if !created || o == nil {
		t.Fatalf("Reserve(x) = %v, %v", o, created)
	}
	if o.Size() != -1 || o.Pinned() {
		t.Fatalf("placeholder size=%d pinned=%v", o.Size(), o.Pinned())
	}
	o2, created := s.Reserve("x")
	if created || o2 != o {
		t.Fatalf("second Reserve(x) = %p, %v; want %p, false", o2, created, o)
	}
	if s.Lookup("x") != o {
		t.Fatal("Lookup(x) does not return the placeholder")
	}
	wantUsed(t, s, 0)
	// Opening a placeholder waits for its size, until ctx ends.
	short, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.OpenObject(short, "x"); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("OpenObject(placeholder) = %v, want TIMEOUT", err)
	}
	if err := o.Append([]byte{1}); err == nil {
		t.Fatal("Append to a placeholder of unknown size succeeded")
	}

	ev, err := s.Allocate(o, 10, 7)
	if err != nil || len(ev) != 0 {
		t.Fatalf("Allocate = %v, %v", ev, err)
	}
	if o.Size() != 10 || o.Fingerprint() != 7 || o.Pinned() {
		t.Fatalf("allocated size=%d fp=%d pinned=%v", o.Size(), o.Fingerprint(), o.Pinned())
	}
	if w, done, err := o.Progress(); w != 0 || done || err != nil {
		t.Fatalf("Progress = %d, %v, %v", w, done, err)
	}
	wantUsed(t, s, 10)
	if o3, created := s.Reserve("x"); created || o3 != o {
		t.Fatal("Reserve after Allocate made a new object")
	}

	// Allocate of a placeholder that was dropped meanwhile.
	d, _ := s.Reserve("d")
	s.Remove("d", messages.ErrDeleted)
	_, err = s.Allocate(d, 5, 0)
	testutil.WantErr(t, err, messages.ErrNotFound)
	wantUsed(t, s, 10)
	if s.Lookup("d") != nil {
		t.Fatal("Allocate resurrected a dropped placeholder")
	}
}

func TestStoreAllocateEvictsLRUJustEnough(t *testing.T) {
	s := NewStore(100)
	cached(t, s, "a", 30)
	cached(t, s, "b", 30)
	cached(t, s, "c", 30)
	wantUsed(t, s, 90)
	// Recency: a was the oldest; Lookup makes it the newest.
	if s.Lookup("a") == nil {
		t.Fatal("a missing")
	}
	// 90+40-100 = 30 bytes needed: exactly one victim, the LRU one (b).
	d, ev, err := reserveAlloc(t, s, "d", 40)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev, []string{"b"}) {
		t.Fatalf("evicted %v, want [b]", ev)
	}
	wantUsed(t, s, 100)
	if s.Lookup("b") != nil {
		t.Fatal("b still present after eviction")
	}
	wantPresent(t, s, "a", "c", "d")

	// d is incomplete (not evictable); LRU order is c, a. 50 bytes
	// needed: c (30) is not enough, so c then a.
	_, ev, err = reserveAlloc(t, s, "e", 50)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev, []string{"c", "a"}) {
		t.Fatalf("evicted %v, want [c a]", ev)
	}
	wantUsed(t, s, 90)
	if s.Lookup("a") != nil || s.Lookup("c") != nil {
		t.Fatal("evicted objects still present")
	}
	wantPresent(t, s, "d", "e")
	if d.Size() != 40 {
		t.Fatal("d changed")
	}
}

func TestStoreReserveAndCreateRefreshRecency(t *testing.T) {
	s := NewStore(100)
	cached(t, s, "a", 40)
	cached(t, s, "b", 40)
	// Reserve of an existing id counts as a use: b becomes the LRU.
	if o, created := s.Reserve("a"); created || o == nil {
		t.Fatal("Reserve(a) made a placeholder")
	}
	_, ev, err := s.Create("c", 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev, []string{"b"}) {
		t.Fatalf("Create evicted %v, want [b]", ev)
	}
	wantUsed(t, s, 90)
	// The creator copy (even incomplete) and a, idle: only a can go.
	_, ev, err = s.Create("d", 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev, []string{"a"}) {
		t.Fatalf("Create evicted %v, want [a]", ev)
	}
	wantUsed(t, s, 100)
}

func TestStoreAllocateFailsWithoutEvicting(t *testing.T) {
	s := NewStore(100)
	p, _, err := s.Create("p", 50, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Append(testutil.Pattern(2, 50)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(p); err != nil {
		t.Fatal(err)
	}
	a := cached(t, s, "a", 20)
	b := cached(t, s, "b", 20)
	wantUsed(t, s, 90)

	// 90+70-100 = 60 needed, only 40 evictable.
	x, ev, err := reserveAlloc(t, s, "x", 70)
	testutil.WantErr(t, err, messages.ErrCapacity)
	if len(ev) != 0 {
		t.Fatalf("evicted %v on failure", ev)
	}
	wantPresent(t, s, "p", "a", "b")
	wantUsed(t, s, 90)
	for _, o := range []*Object{a, b} {
		if _, _, err := o.Progress(); err != nil {
			t.Fatalf("%s failed by a failed Allocate: %v", o.ID(), err)
		}
	}
	// The placeholder is failed and removed.
	if s.Lookup("x") != nil {
		t.Fatal("placeholder x still in the store")
	}
	if _, _, err := x.Progress(); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("placeholder error = %v, want CAPACITY", err)
	}
	testutil.WantErr(t, x.WaitComplete(t.Context()), messages.ErrCapacity)
	x2, created := s.Reserve("x")
	if !created || x2 == x {
		t.Fatal("Reserve after a failed Allocate returned the failed placeholder")
	}

	// Bigger than the whole capacity: CAPACITY even on an empty store.
	e := NewStore(100)
	y, _, err := reserveAlloc(t, e, "y", 101)
	testutil.WantErr(t, err, messages.ErrCapacity)
	if e.Lookup("y") != nil {
		t.Fatal("placeholder y still in the store")
	}
	testutil.WantErr(t, y.WaitComplete(t.Context()), messages.ErrCapacity)
	wantUsed(t, e, 0)
	// Exactly the capacity fits.
	if _, _, err := reserveAlloc(t, e, "z", 100); err != nil {
		t.Fatalf("object of exactly the capacity: %v", err)
	}
	wantUsed(t, e, 100)
}

func TestStoreOpenReaderHoldsAgainstEviction(t *testing.T) {
	s := NewStore(100)
	a := cached(t, s, "a", 60)
	r1, err := s.OpenObject(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if r1.Size() != 60 {
		t.Fatalf("reader Size() = %d", r1.Size())
	}
	r2, err := s.OpenObject(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = reserveAlloc(t, s, "x", 60)
	testutil.WantErr(t, err, messages.ErrCapacity)
	wantPresent(t, s, "a")

	r1.Close()
	r1.Close() // harmless: must not release r2's hold
	_, _, err = reserveAlloc(t, s, "x", 60)
	testutil.WantErr(t, err, messages.ErrCapacity)
	wantPresent(t, s, "a")
	if _, _, err := a.Progress(); err != nil {
		t.Fatalf("held object failed: %v", err)
	}

	r2.Close()
	r3, err := s.OpenObject(t.Context(), "a")
	if err != nil {
		t.Fatal(err)
	}
	// r3 is the only reader; a double Close of r1/r2 must not have
	// driven the count below zero and made r3's hold ineffective.
	_, _, err = reserveAlloc(t, s, "x", 60)
	testutil.WantErr(t, err, messages.ErrCapacity)
	r3.Close()

	_, ev, err := reserveAlloc(t, s, "x", 60)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ev, []string{"a"}) {
		t.Fatalf("evicted %v, want [a]", ev)
	}
	wantUsed(t, s, 60)
	// A reader of an evicted object sees its error, which says it was
	// evicted (a Get waiting on it asks again).
	_, err = a.ReadAt(t.Context(), 0, 10)
	testutil.WantErr(t, err, messages.ErrNotFound)
	if _, _, perr := a.Progress(); !Evicted(err) || !Evicted(perr) {
		t.Fatalf("the evicted copy's errors %v, %v do not say it was evicted", err, perr)
	}
	if Evicted(messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on this node", "a")) {
		t.Fatal("another NOT_FOUND taken for an eviction")
	}
	_, err = s.OpenObject(t.Context(), "a")
	testutil.WantErr(t, err, messages.ErrNotFound)
}

func TestStoreIncompleteNotEvicted(t *testing.T) {
	s := NewStore(100)
	a, _, err := reserveAlloc(t, s, "a", 60)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(testutil.Pattern(3, 60)); err != nil {
		t.Fatal(err)
	}
	// All bytes are there but the copy is not marked complete.
	_, _, err = reserveAlloc(t, s, "x", 60)
	testutil.WantErr(t, err, messages.ErrCapacity)
	wantPresent(t, s, "a")
	if err := s.Complete(a); err != nil {
		t.Fatal(err)
	}
	_, ev, err := reserveAlloc(t, s, "x", 60)
	if err != nil || !slices.Equal(ev, []string{"a"}) {
		t.Fatalf("after Complete: evicted %v, %v; want [a]", ev, err)
	}
}

func TestStoreUsedAccounting(t *testing.T) {
	s := NewStore(100)
	p, _, err := s.Create("p", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	wantUsed(t, s, 10)
	cached(t, s, "a", 20)
	wantUsed(t, s, 30)
	x, _, err := reserveAlloc(t, s, "x", 30)
	if err != nil {
		t.Fatal(err)
	}
	wantUsed(t, s, 60)
	if err := x.Append(testutil.Pattern(4, 5)); err != nil {
		t.Fatal(err)
	}
	s.Abort(x, messages.ErrInternal)
	wantUsed(t, s, 30)
	if s.Lookup("x") != nil {
		t.Fatal("aborted x still present")
	}
	s.Abort(x, messages.ErrInternal) // twice: no double refund
	wantUsed(t, s, 30)

	// Aborting a stale object must not touch the store's newer copy.
	y1, _ := s.Reserve("y")
	s.Remove("y", messages.ErrDeleted)
	y2, _, err := reserveAlloc(t, s, "y", 15)
	if err != nil {
		t.Fatal(err)
	}
	wantUsed(t, s, 45)
	s.Abort(y1, messages.ErrInternal)
	if s.Lookup("y") != y2 {
		t.Fatal("Abort of a stale object removed the current copy")
	}
	if _, _, err := y2.Progress(); err != nil {
		t.Fatalf("current copy failed: %v", err)
	}
	wantUsed(t, s, 45)

	// A placeholder costs nothing, before and after abort.
	z, _ := s.Reserve("z")
	wantUsed(t, s, 45)
	s.Abort(z, messages.ErrInternal)
	wantUsed(t, s, 45)

	if !s.Remove("a", messages.ErrDeleted) {
		t.Fatal("Remove(a) = false")
	}
	wantUsed(t, s, 25)
	if s.Remove("a", messages.ErrDeleted) {
		t.Fatal("second Remove(a) = true")
	}
	wantUsed(t, s, 25)
	s.Remove("y", messages.ErrDeleted)
	wantUsed(t, s, 10)

	// Evict then fail: used goes to exactly capacity, then unchanged.
	cached(t, s, "b", 40)
	cached(t, s, "c", 40)
	wantUsed(t, s, 90)
	_, ev, err := reserveAlloc(t, s, "d", 50)
	if err != nil || !slices.Equal(ev, []string{"b"}) {
		t.Fatalf("evicted %v, %v; want [b]", ev, err)
	}
	wantUsed(t, s, 100)
	_, _, err = reserveAlloc(t, s, "e", 95)
	testutil.WantErr(t, err, messages.ErrCapacity)
	wantUsed(t, s, 100)

	for _, id := range []string{"c", "d", "p"} {
		if !s.Remove(id, messages.ErrDeleted) {
			t.Fatalf("Remove(%s) = false", id)
		}
	}
	wantUsed(t, s, 0)
	if len(s.Objects()) != 0 {
		t.Fatalf("Objects() = %d objects, want 0", len(s.Objects()))
	}
	if _, _, err := p.Progress(); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("removed p: err = %v, want DELETED", err)
	}
}

func TestStoreObjectsSorted(t *testing.T) {
	s := NewStore(100)
	for _, id := range []string{"m", "c", "x", "a"} {
		s.Reserve(id)
	}
	var ids []string
	for _, o := range s.Objects() {
		ids = append(ids, o.ID())
	}
	if !slices.Equal(ids, []string{"a", "c", "m", "x"}) {
		t.Fatalf("Objects() = %v", ids)
	}
}

func TestStoreComplete(t *testing.T) {
	s := NewStore(100)
	o, _, err := reserveAlloc(t, s, "o", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(testutil.Pattern(5, 9)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err == nil {
		t.Fatal("Complete of a partial object succeeded")
	}
	if _, done, _ := o.Progress(); done {
		t.Fatal("partial object marked done")
	}
	if err := o.Append(testutil.Pattern(5, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	b, err := o.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want := append(testutil.Pattern(5, 9), testutil.Pattern(5, 1)...)
	if !bytes.Equal(b, want) {
		t.Fatalf("Bytes() = %v, want %v", b, want)
	}

	// Completing a removed object reports the removal.
	g, _, err := reserveAlloc(t, s, "g", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Append([]byte{9}); err != nil {
		t.Fatal(err)
	}
	s.Remove("g", messages.ErrDeleted)
	testutil.WantErr(t, s.Complete(g), messages.ErrDeleted)
	if s.Lookup("g") != nil {
		t.Fatal("Complete resurrected a removed object")
	}
}

func TestStoreOpenObjectWaitsForSize(t *testing.T) {
	s := NewStore(100)
	o, _ := s.Reserve("o")
	type openResult struct {
		size int64
		err  error
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	open := func(id string) <-chan openResult {
		ch := make(chan openResult, 1)
		go func() {
			r, err := s.OpenObject(ctx, id)
			if err != nil {
				ch <- openResult{-1, err}
				return
			}
			size := r.Size()
			// Hold it: the object must not be evictable while open.
			other, _ := s.Reserve(id + "-other")
			_, aerr := s.Allocate(other, 100, 0)
			r.Close()
			if !errors.Is(aerr, messages.ErrCapacity) {
				aerr = messages.Errorf(messages.ErrorCode_INTERNAL, "allocation with an open reader: %v", aerr)
			} else {
				aerr = nil
			}
			ch <- openResult{size, aerr}
		}()
		return ch
	}
	ch := open("o")
	notYet(t, ch, "OpenObject of a placeholder")
	if _, err := s.Allocate(o, 60, 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Append(testutil.Pattern(6, 60)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	r := testutil.Recv(t, ch, "OpenObject after Allocate")
	if r.err != nil || r.size != 60 {
		t.Fatalf("OpenObject = size %d, %v; want 60", r.size, r.err)
	}

	// A placeholder removed while a reader waits: NOT_FOUND, not a hang.
	p, _ := s.Reserve("p")
	ch = open("p")
	notYet(t, ch, "OpenObject of a placeholder")
	s.Abort(p, messages.ErrUnavailable)
	if r := testutil.Recv(t, ch, "OpenObject after Abort"); r.err == nil {
		t.Fatal("OpenObject of an aborted placeholder succeeded")
	}
	_, err := s.OpenObject(ctx, "missing")
	testutil.WantErr(t, err, messages.ErrNotFound)
}

// A reduce worker's output may be opened by its parent before the worker
// creates it (the coordinator sends a subtree's tasks together): an
// internal id is waited for until it is created or the context ends; an
// application id that is not here fails at once.
func TestStoreOpenObjectWaitsForInternalOutput(t *testing.T) {
	s := NewStore(100)
	id := directory.InternalPrefix + "reduce/r/1/1"
	opened := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		r, err := s.OpenObject(ctx, id)
		if err == nil {
			if r.Size() != 8 {
				err = messages.Errorf(messages.ErrorCode_INTERNAL, "opened with size %d, want 8", r.Size())
			}
			r.Close()
		}
		opened <- err
	}()
	notYet(t, opened, "OpenObject of an intermediate not created yet")
	if _, _, err := s.Create("unrelated", 4, 0); err != nil {
		t.Fatal(err)
	}
	notYet(t, opened, "OpenObject after another object was created")
	if _, _, err := s.Create(id, 8, 0); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Recv(t, opened, "OpenObject after Create"); err != nil {
		t.Fatalf("OpenObject = %v", err)
	}

	// The wait ends with its context, as UNAVAILABLE (TIMEOUT at its
	// deadline: TestOpenIntermediateNotCreatedIsNotNotFound).
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := s.OpenObject(ctx, directory.InternalPrefix+"reduce/r/2/1")
	testutil.WantErr(t, err, messages.ErrUnavailable)

	// A failed store has nothing to wait for, and says its node is gone
	// (UNAVAILABLE: readers fail over), not that the object is missing.
	waiting := make(chan error, 1)
	go func() {
		_, err := s.OpenObject(t.Context(), directory.InternalPrefix+"reduce/r/3/1")
		waiting <- err
	}()
	notYet(t, waiting, "OpenObject of an intermediate not created yet")
	s.Fail(messages.ErrUnavailable)
	testutil.WantErr(t, testutil.Recv(t, waiting, "OpenObject after Fail"), messages.ErrUnavailable)
	_, err = s.OpenObject(t.Context(), "a-user-object")
	testutil.WantErr(t, err, messages.ErrUnavailable)
}

// OnEvict hears every copy the store evicts, whichever call made room,
// and nothing once it is unset.
func TestStoreOnEvictHearsEachEviction(t *testing.T) {
	s := NewStore(100)
	var heard []string
	s.OnEvict(func(id string) { heard = append(heard, id) })
	cached(t, s, "a", 30)
	cached(t, s, "b", 30)
	cached(t, s, "c", 30)
	if _, _, err := reserveAlloc(t, s, "d", 40); err != nil {
		t.Fatal(err)
	}
	if _, ev, err := s.Create("e", 50, 0); err != nil || !slices.Equal(heard, append([]string{"a"}, ev...)) {
		t.Fatalf("heard %v, evicted a then %v (err %v)", heard, ev, err)
	}
	s = NewStore(50)
	s.OnEvict(func(id string) { heard = append(heard, id) })
	s.OnEvict(nil)
	before := len(heard)
	cached(t, s, "x", 30)
	if _, ev, err := s.Create("y", 30, 0); err != nil || !slices.Equal(ev, []string{"x"}) {
		t.Fatalf("Create evicted %v (err %v), want [x]", ev, err)
	}
	if len(heard) != before {
		t.Fatalf("heard %v after OnEvict(nil)", heard[before:])
	}
}

// RemoveObject drops the copy it names and no other: once the id holds
// another object (removed, then created again), the old one's removal
// leaves the new one.
func TestRemoveObjectDropsOnlyThatCopy(t *testing.T) {
	s := NewStore(1 << 20)
	old, _, err := s.Create("x", 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Remove("x", errors.New("gone")) {
		t.Fatal("Remove of a held id reported nothing held")
	}
	fresh, _, err := s.Create("x", 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	if s.RemoveObject(old, errors.New("deleted")) || s.Lookup("x") != fresh {
		t.Fatal("RemoveObject of a copy the store no longer holds dropped the id's new object")
	}
	if !s.RemoveObject(fresh, errors.New("deleted")) || s.Lookup("x") != nil {
		t.Fatal("RemoveObject of the store's copy left it")
	}
	if s.RemoveObject(nil, errors.New("deleted")) {
		t.Fatal("RemoveObject(nil) reported a removal")
	}
}
