package clock

import (
	"context"
	"errors"
	"runtime/pprof"
	"testing"
	"time"
)

// SleepUntil never returns before its time, for times past, at hand and
// ahead, and a cancelled or expired context ends it with the context's
// error.
func TestSleepUntil(t *testing.T) {
	for _, ahead := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 700 * time.Microsecond, 3 * time.Millisecond} {
		at := time.Now().Add(ahead)
		if err := SleepUntil(context.Background(), at); err != nil {
			t.Fatalf("%v ahead: %v", ahead, err)
		}
		if now := time.Now(); now.Before(at) {
			t.Errorf("%v ahead: returned %v early", ahead, at.Sub(now))
		}
	}
	// A sleep that ignored its context would last the hour: the test
	// binary's timeout, not a time assertion, catches that.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("past the context's deadline: %v, want DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(5*time.Millisecond, cancel)
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, want Canceled", err)
	}
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); !errors.Is(err, context.Canceled) {
		t.Fatalf("already cancelled: %v, want Canceled", err)
	}
}

// SleepUntil's waits park their goroutines, not threads: 200 at once
// start few threads (a wait blocked in a system call, as clock_nanosleep
// was, would have started one each).
func TestSleepUntilManyAtOnce(t *testing.T) {
	threads := pprof.Lookup("threadcreate")
	before := threads.Count()
	at := time.Now().Add(50 * time.Millisecond)
	errs := make(chan error, 200)
	for range cap(errs) {
		go func() { errs <- SleepUntil(context.Background(), at) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if now := time.Now(); now.Before(at) {
		t.Errorf("returned %v early", at.Sub(now))
	}
	if n := threads.Count() - before; n > 20 {
		t.Errorf("200 waits started %d threads", n)
	}
}
