package policy

import (
	"errors"
	"testing"
	"time"
)

// The tests drive a Barrier through Step alone; these name its events
// as the tests read them.

func (b *Barrier) Enter(now time.Time, label, host string) (Decision, error) {
	d := b.Step(now, Enter{Label: label, Host: host})
	return d, d.Err
}

func (b *Barrier) Tick(now time.Time) Decision { return b.Step(now, Tick{}) }

func (b *Barrier) Release(now time.Time, label string) (Decision, error) {
	d := b.Step(now, Release{Label: label})
	return d, d.Err
}

func (b *Barrier) ForceFire(now time.Time) (Decision, error) {
	d := b.Step(now, ForceFire{})
	return d, d.Err
}

func (b *Barrier) Veto(now time.Time) (Decision, error) {
	d := b.Step(now, Veto{})
	return d, d.Err
}

// A refused event's Decision holds its error and asks for nothing, not
// even the timer the barrier still has; an event that is no Event of the
// barrier is refused.
func TestStepRefusalAsksForNothing(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 3, Timeout: time.Minute})
	d := mustEnter(t, b, t0, "a")
	if len(d.Timers) != 1 || !d.Timers[0].At.Equal(t0.Add(time.Minute)) || d.Timers[0].Msg != (Tick{}) {
		t.Fatalf("timers %+v: want one Tick at the timeout", d.Timers)
	}
	for _, ev := range []Event{Enter{Label: "a"}, Release{Label: "a"}, nil} {
		d := b.Step(t0.Add(time.Second), ev)
		if d.Err == nil || !d.Empty() || !d.Next().IsZero() {
			t.Fatalf("%#v: %+v, want a refusal asking for nothing", ev, d)
		}
	}
	if d := b.Step(t0, nil); !errors.Is(d.Err, ErrUnknownEvent) {
		t.Fatalf("nil event: %v", d.Err)
	}
	if b.Entered() != 1 {
		t.Fatalf("%d entered after refusals, want 1", b.Entered())
	}
}
