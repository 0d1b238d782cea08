package member

import (
	"testing"
	"time"
)

// The wait doubles after every round that changed nothing, up to
// quietFactor times the base, and a change brings it back to the base.
func TestQuietPaceBacksOffAndReturns(t *testing.T) {
	q := newQuietPace(100 * time.Millisecond)
	var got []time.Duration
	for range 6 {
		got = append(got, q.Next(false))
	}
	want := []time.Duration{200, 400, 800, 1000, 1000, 1000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("waits after quiet rounds: %v, want %v ms", got, want)
		}
	}
	if d := q.Next(true); d != 100*time.Millisecond {
		t.Fatalf("after a change: %v, want the base", d)
	}
	if d := q.Next(false); d != 200*time.Millisecond {
		t.Fatalf("a quiet round after the change: %v", d)
	}
}

// A Kick ends a Wait at once and brings the interval back to the base;
// a Kick while nobody waits ends the next Wait at once; a closed done
// ends a Wait with false.
func TestQuietPaceKick(t *testing.T) {
	q := newQuietPace(time.Second)
	for range 5 {
		q.Next(false)
	}
	woke := make(chan bool)
	go func() { woke <- q.Wait(nil, time.Hour) }()
	q.Kick()
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("a kicked Wait returned false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Kick did not end the Wait")
	}
	if d := q.Next(false); d != 2*time.Second {
		t.Fatalf("the first quiet round after a Kick waits %v, want twice the base", d)
	}

	q.Kick() // nobody waits: kept for the next Wait
	go func() { woke <- q.Wait(nil, time.Hour) }()
	select {
	case ok := <-woke:
		if !ok {
			t.Fatal("a Wait after a pending Kick returned false")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a pending Kick did not end the next Wait")
	}

	done := make(chan struct{})
	close(done)
	if q.Wait(done, time.Hour) {
		t.Fatal("Wait returned true after done closed")
	}
}
