package shardactor

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A run scheduled while a call is armed is that call's: its disarm runs
// it on the caller's goroutine, and nothing runs it before.
func TestHandoffRunsTheCaughtRunAtDisarm(t *testing.T) {
	h := &handoff{}
	var ran atomic.Int32
	h.arm()
	h.Schedule(func() { ran.Add(1) })
	if ran.Load() != 0 {
		t.Fatal("the caught run ran before disarm")
	}
	h.disarm()
	if ran.Load() != 1 {
		t.Fatalf("disarm ran the caught run %d times, want 1", ran.Load())
	}
	if h.caught != nil || h.armed != 0 {
		t.Fatalf("after disarm: caught %v, armed %d", h.caught != nil, h.armed)
	}
}

// Unarmed, a run goes to the worker pool.
func TestHandoffUnarmedGoesToThePool(t *testing.T) {
	h := &handoff{}
	done := make(chan struct{})
	h.Schedule(func() { close(done) })
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("an unarmed run did not run on the pool")
	}
}

// Whatever the interleaving of arms, disarms and runs scheduled by
// other senders, every run is run exactly once: none is left caught
// after the last disarm.
func TestHandoffEveryRunRunsOnce(t *testing.T) {
	h := &handoff{}
	const callers, schedulers, each = 8, 4, 2000
	var scheduled, ran atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				h.arm()
				if scheduled.Add(1)%2 == 0 {
					h.Schedule(func() { ran.Add(1) })
				} else {
					scheduled.Add(-1)
				}
				h.disarm()
			}
		}()
	}
	for range schedulers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				scheduled.Add(1)
				h.Schedule(func() { ran.Add(1) })
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for ran.Load() != scheduled.Load() {
		if ctx.Err() != nil {
			t.Fatalf("%d runs scheduled, %d ran", scheduled.Load(), ran.Load())
		}
		time.Sleep(time.Millisecond)
	}
	if h.caught != nil || h.armed != 0 {
		t.Fatalf("at the end: caught %v, armed %d", h.caught != nil, h.armed)
	}
}
