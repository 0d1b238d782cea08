package clock

import (
	"context"
	"testing"
	"time"
)

// A sleep that ends on time keeps its timerfd for the next sleep (closing
// it would cost the woken thread two system calls); a cancelled one, whose
// file has a deadline set, is closed.
func TestSleepUntilReusesItsTimer(t *testing.T) {
	for len(idleTimers) > 0 {
		(<-idleTimers).f.Close()
	}
	if err := SleepUntil(context.Background(), time.Now().Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := len(idleTimers); n != 1 {
		t.Fatalf("%d timers kept after a sleep, want 1", n)
	}
	kept := (<-idleTimers)
	idleTimers <- kept
	if err := SleepUntil(context.Background(), time.Now().Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if again := <-idleTimers; again.fd != kept.fd {
		t.Fatalf("the second sleep used timerfd %d, not the kept %d", again.fd, kept.fd)
	} else {
		idleTimers <- again
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
	defer cancel()
	if err := SleepUntil(ctx, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("a sleep past its context's deadline returned no error")
	}
	if n := len(idleTimers); n != 0 {
		t.Fatalf("%d timers kept after a cancelled sleep took the only one, want 0", n)
	}
}
