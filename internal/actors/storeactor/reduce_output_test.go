package storeactor

import (
	"errors"
	"runtime"
	"testing"
	"weak"

	"github.com/hoplite-go/hoplite/internal/objstore"
)

// collectedAfterGC reports whether w's object is gone after a few
// collections.
func collectedAfterGC(w weak.Pointer[objstore.Object]) bool {
	for range 3 {
		runtime.GC()
		if w.Value() == nil {
			return true
		}
	}
	return false
}

// A released position hands its output over to be dropped and holds no
// reference to it: once the store has dropped it, the output (and the
// buffer under it) is garbage even while the position lives on (a
// stopped worker stays reachable as long as a PID that cached it does).
// A released position makes no new output.
func TestReleasedPositionHoldsNoOutput(t *testing.T) {
	store := objstore.NewStore(1 << 20)
	p := &positionOutput{}
	mk := func(id string) func() (*objstore.Object, error) {
		return func() (*objstore.Object, error) {
			o, _, err := store.Create(id, 64, 0)
			return o, err
		}
	}
	o, _, err := p.create(false, mk("out"))
	if err != nil {
		t.Fatal(err)
	}
	w := weak.Make(o)
	got, target := p.release()
	if got != o || target {
		t.Fatalf("release = %p, %v; want the output %p, not a target", got, target, o)
	}
	if p.load() != nil {
		t.Fatal("a released position still has its output")
	}
	if again, _ := p.release(); again != nil {
		t.Fatal("a second release returned the output again")
	}
	dropReleased(store, got, target, "r1")
	o, got = nil, nil
	if !collectedAfterGC(w) {
		t.Fatal("the dropped output of a released position is still reachable")
	}
	if _, _, err := p.create(false, mk("out-2")); !errors.Is(err, errReleased) {
		t.Fatalf("create after release: %v, want errReleased", err)
	}
	if !p.isReleased() {
		t.Fatal("not released")
	}
	runtime.KeepAlive(p)
}

// A worker that stops forgets its output: a kept target stays the
// store's (and its readers'), and the stopped worker's position no
// longer keeps it alive once the store lets it go.
func TestForgottenOutputIsNotHeld(t *testing.T) {
	store := objstore.NewStore(1 << 20)
	p := &positionOutput{}
	o, _, err := p.create(true, func() (*objstore.Object, error) {
		o, _, err := store.Create("target", 64, 0)
		return o, err
	})
	if err != nil {
		t.Fatal(err)
	}
	w := weak.Make(o)
	p.forget()
	if p.load() != nil {
		t.Fatal("a forgotten output is still loaded")
	}
	if store.Lookup("target") != o {
		t.Fatal("forget dropped the kept target from the store")
	}
	store.Remove("target", nil)
	o = nil
	if !collectedAfterGC(w) {
		t.Fatal("a forgotten output is still reachable after the store removed it")
	}
	runtime.KeepAlive(p)
}
