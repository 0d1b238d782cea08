package bufalloc

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

// A large buffer let go is collected without waiting for the heap to
// grow to its next goal: its memory is free again for the next one.
func TestReleasedCollectsLargeBuffers(t *testing.T) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	runs, _ := collections()

	Released(HugeMin - 1) // small: nothing
	time.Sleep(10 * collectGap)
	if got, _ := collections(); got != runs {
		t.Fatalf("a buffer under HugeMin started %d collections", got-runs)
	}

	b := Make(32 << 20)
	b[0] = 1
	b = nil
	Released(32 << 20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.ReadMemStats(&ms)
		if got, _ := collections(); ms.NumGC > before && got > runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no collection after a 32 MiB buffer was let go (NumGC %d, was %d)", ms.NumGC, before)
		}
		time.Sleep(time.Millisecond)
	}
	_ = b
}

// Many buffers let go at once make a few collections, not one each.
func TestReleasedCollectsAtMostOncePerGap(t *testing.T) {
	runs, _ := collections()
	start := time.Now()
	for range 1000 {
		Released(HugeMin)
	}
	took := time.Since(start) // the time over which they came
	var n int64
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, running := collections()
		if got > runs && !running {
			n = got - runs
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the collector did not finish")
		}
		time.Sleep(collectGap)
	}
	// One for the first, one per gap while they came, and one for those
	// that came during the last.
	if max := int64(took/collectGap) + 2; n < 1 || n > max {
		t.Fatalf("%d collections for 1000 buffers let go within %v, want 1..%d", n, took, max)
	}
}

// waitCollector waits until Released's collector is done, and returns
// its follow-up collections since before.
func waitCollector(t *testing.T, before int64) int64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		collector.mu.Lock()
		running, n := collector.running, collector.followUps
		collector.mu.Unlock()
		if !running {
			return n - before
		}
		if time.Now().After(deadline) {
			t.Fatal("the collector did not finish")
		}
		time.Sleep(collectGap)
	}
}

func reopenedNow() int64 {
	warm.mu.Lock()
	defer warm.mu.Unlock()
	return warm.reopened
}

func followUpsNow() int64 {
	collector.mu.Lock()
	defer collector.mu.Unlock()
	return collector.followUps
}

// releaseAndCollect calls Released and waits until its collection is
// over: the collector began it (runs counted it), and a collection ended
// after that was seen (that one, or, if it ended first, the next: a
// follow-up's).
func releaseAndCollect(t *testing.T, n int) {
	t.Helper()
	runs, _ := collections()
	Released(n)
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := collections(); got == runs; got, _ = collections() {
		if time.Now().After(deadline) {
			t.Fatal("Released started no collection")
		}
		time.Sleep(time.Millisecond)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.NumGC
	for ms.NumGC == before {
		if time.Now().After(deadline) {
			t.Fatal("no collection ended after Released")
		}
		time.Sleep(time.Millisecond)
		runtime.ReadMemStats(&ms)
	}
}

// quickFollowUps shortens the follow-ups' pauses for a test (no
// collector may run: the collector reads them).
func quickFollowUps(t *testing.T) {
	waitCollector(t, 0)
	saved := recollectAfter
	recollectAfter = []time.Duration{50 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond}
	t.Cleanup(func() {
		waitCollector(t, 0)
		recollectAfter = saved
	})
}

// A piece of the reserve still held when its release's collection ran
// is let go a moment later: a follow-up collection, with nothing else
// released, makes the reserve whole again.
func TestReleasedCollectsAgainWhileTheReservePieceIsHeld(t *testing.T) {
	resetReserve()
	t.Cleanup(resetReserve)
	// Only the collector's collections may run: one the runtime starts on
	// its own after the piece is let go would make the reserve whole
	// with no follow-up, and the test would prove nothing.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	quickFollowUps(t)
	// Later follow-ups too: on a loaded machine the release's own
	// collection can end after the quick ones, before the piece is let
	// go, and then no follow-up would be left to find it let go.
	recollectAfter = append(recollectAfter[:len(recollectAfter):len(recollectAfter)], 2*time.Second, 2*time.Second)
	const n = 2 * HugeMin
	Reserve(n)
	piece := Make(HugeMin)
	if Reserved() != n-HugeMin {
		t.Fatalf("%d bytes ready after a cut, want %d", Reserved(), n-HugeMin)
	}
	before, reopened := followUpsNow(), reopenedNow()
	releaseAndCollect(t, HugeMin) // with piece held
	piece[0] = 1
	runtime.KeepAlive(piece)
	piece = nil
	// Polls the finalizer's count, not Reserved: a poll that looks at
	// the pieces' allocation is a root of it whenever a collection finds
	// the test's goroutine there.
	deadline := time.Now().Add(5 * time.Second)
	for reopenedNow() == reopened {
		if time.Now().After(deadline) {
			t.Fatalf("the reserve still cut (%d of %d bytes ready) 5 s after its piece was let go", Reserved(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if Reserved() != n {
		t.Fatalf("%d of %d bytes ready once the reserve was made whole again", Reserved(), n)
	}
	if got := waitCollector(t, before); got < 1 {
		t.Fatalf("the reserve is whole again after %d follow-up collections, want at least 1", got)
	}
}

// The follow-ups end once a new piece is cut (it holds the reserve until
// its own release), and after the last pause while a piece stays held.
func TestReleasedFollowUpsAreBounded(t *testing.T) {
	resetReserve()
	t.Cleanup(resetReserve)
	quickFollowUps(t)
	Reserve(3 * HugeMin)
	kept := Make(HugeMin)
	before := followUpsNow()
	Released(HugeMin)
	if got := waitCollector(t, before); got != int64(len(recollectAfter)) {
		t.Fatalf("%d follow-up collections with a piece held throughout, want %d", got, len(recollectAfter))
	}

	before = followUpsNow()
	Released(HugeMin)
	next := Make(HugeMin) // cut after the release, before the first pause ends
	if got := waitCollector(t, before); got != 0 {
		t.Fatalf("%d follow-up collections after a new piece was cut, want none", got)
	}
	runtime.KeepAlive(kept)
	runtime.KeepAlive(next)
}
