package actorutil

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// waitIdle waits until n workers are parked (the pool has no event to
// wait for: it polls).
func waitIdle(t *testing.T, n int32) {
	t.Helper()
	end := time.Now().Add(workerIdle + 5*time.Second)
	for idleWorkers.Load() != n {
		if time.Now().After(end) {
			t.Fatalf("%d workers parked, want %d", idleWorkers.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// emptyPool ends every parked worker and clears the pool's floor (kept)
// for a test that counts the pool's workers from none; the floor comes
// back after it.
func emptyPool(t *testing.T) {
	t.Helper()
	floor := kept.Swap(0)
	t.Cleanup(func() { kept.Store(floor) })
	drainPool(t)
}

// drainPool ends every parked worker.
func drainPool(t *testing.T) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for idleWorkers.Load() > 0 {
		select {
		case idleWork <- runtime.Goexit: // the worker that takes it ends
		default:
			if time.Now().After(end) {
				t.Fatalf("%d workers still parked", idleWorkers.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// Dispatcher runs each function once, on a parked worker when there is
// one; it parks at most maxIdleWorkers, and none after workerIdle.
func TestWorkerPool(t *testing.T) {
	emptyPool(t)
	d := Dispatcher
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
	for range burst {
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
	waitIdle(t, 0)              // and the parked ones leave after workerIdle
}

// countingDispatcher counts the runs it is handed.
type countingDispatcher struct{ n atomic.Int32 }

func (d *countingDispatcher) Schedule(fn func()) { d.n.Add(1); go fn() }
func (*countingDispatcher) Throughput() int      { return 1 }

// Props run their actors on Dispatcher (its worker parks after the
// actor's first run), and a dispatcher option given to them wins.
func TestPropsUseTheWorkerPool(t *testing.T) {
	emptyPool(t)
	system := actor.NewActorSystem()
	for _, props := range []*actor.Props{
		PropsFromFunc(func(actor.Context) {}),
		Props(func() actor.Actor { return actor.ReceiveFunc(func(actor.Context) {}) }),
	} {
		drainPool(t)
		// A floor of one keeps the worker that ran the actor parked until
		// the test looks: a worker beyond the floor leaves after
		// workerIdle, and on a loaded machine the test looked later.
		kept.Store(1)
		pid := system.Root.Spawn(props)
		if err := system.Root.StopFuture(pid).Wait(); err != nil {
			t.Fatal(err)
		}
		waitIdle(t, 1)
		kept.Store(0)
	}
	var other countingDispatcher
	pid := system.Root.Spawn(PropsFromFunc(func(actor.Context) {}, actor.WithDispatcher(&other)))
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	if other.n.Load() == 0 {
		t.Error("a dispatcher option given to PropsFromFunc was overridden")
	}
}

// Once the kept workers are started (WarmWorkers), KeptWorkers stay
// parked however long the pool is idle, and the workers beyond them
// still leave after workerIdle.
func TestKeptWorkersStayParked(t *testing.T) {
	emptyPool(t)
	startKept()
	waitIdle(t, KeptWorkers)
	// A burst of twice as many at once, then a pause past workerIdle.
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 * KeptWorkers {
		wg.Add(1)
		Dispatcher.Schedule(func() {
			defer wg.Done()
			<-release
		})
	}
	close(release)
	wg.Wait()
	waitIdle(t, 2*KeptWorkers)
	time.Sleep(workerIdle + 200*time.Millisecond)
	waitIdle(t, KeptWorkers)
	// The kept ones still run what comes.
	ran := make(chan int32, 1)
	Dispatcher.Schedule(func() { ran <- idleWorkers.Load() })
	if n := <-ran; n != KeptWorkers-1 {
		t.Fatalf("%d workers parked while one of the kept ran a function, want %d", n, KeptWorkers-1)
	}
	// WarmWorkers starts them once a process, and waits for them parked.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	WarmWorkers(ctx)
	WarmWorkers(ctx)
	if n := idleWorkers.Load(); n < KeptWorkers || n > 2*KeptWorkers {
		t.Fatalf("%d workers parked after WarmWorkers, want %d to %d", n, KeptWorkers, 2*KeptWorkers)
	}
}
