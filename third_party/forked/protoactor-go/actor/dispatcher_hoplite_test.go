package actor

import (
	"sync"
	"testing"
	"time"
)

// waitIdle waits until n workers are parked.
func waitIdle(t *testing.T, n int32) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for idleWorkers.Load() != n {
		if time.Now().After(end) {
			t.Fatalf("%d workers parked, want %d", idleWorkers.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Hoplite patch: the default dispatcher runs each function once, on a
// parked worker when there is one; it parks at most maxIdleWorkers, and
// none after workerIdle.
func TestPooledDispatcher(t *testing.T) {
	d := NewDefaultDispatcher(1)
	waitIdle(t, 0)
	done := make(chan struct{})
	d.Schedule(func() { close(done) })
	<-done
	waitIdle(t, 1)
	// The parked worker takes the next function: inside it, no worker is
	// parked (a fresh goroutine would have left the parked one waiting).
	parked := make(chan int32, 1)
	d.Schedule(func() { parked <- idleWorkers.Load() })
	if n := <-parked; n != 0 {
		t.Fatalf("a function scheduled beside a parked worker ran on a new goroutine (%d parked)", n)
	}
	// A burst: every function runs once, however many run at once.
	const burst = 3 * maxIdleWorkers
	release := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ran := 0
	for i := 0; i < burst; i++ {
		wg.Add(1)
		d.Schedule(func() {
			defer wg.Done()
			<-release
			mu.Lock()
			ran++
			mu.Unlock()
		})
	}
	close(release)
	wg.Wait()
	if ran != burst {
		t.Fatalf("%d of %d functions ran", ran, burst)
	}
	waitIdle(t, maxIdleWorkers) // the rest returned
	// Idle workers leave after workerIdle.
	time.Sleep(workerIdle)
	waitIdle(t, 0)
}
