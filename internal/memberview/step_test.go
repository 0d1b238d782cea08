package memberview

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The tests drive a View through Step alone, as the member actor does:
// a Tick sets the time, and the events after it are stepped at that
// time. These name the events as the tests read them.

func (v *View) SetNow(now time.Time) { v.Step(now, Tick{}) }

func (v *View) Topology(members []Member) (joined, left []string) {
	o := v.Step(v.now, Topology{Members: members})
	return o.Joined, o.Left
}

func (v *View) Hello(id, address string, store *messages.NodeRef, compatible bool, why string) bool {
	return v.Step(v.now, Hello{ID: id, Address: address, Store: store, Compatible: compatible, Why: why}).Changed
}

func (v *View) Failed(id, address string) bool {
	return v.Step(v.now, Failed{ID: id, Address: address}).Changed
}

func (v *View) Blame(id, by string) { v.Step(v.now, Blame{ID: id, By: by}) }

func (v *View) Leave() { v.Step(v.now, Leave{}) }

func (v *View) Leaving(id string) bool { return v.Step(v.now, Leaving{ID: id}).Changed }

func (v *View) Departed(id string) bool { return v.Step(v.now, Departed{ID: id}).Changed }

// A step at a later time ends a quarantine due by then whatever its
// event, and asks its shell for nothing in the Box.
func TestStepEndsAQuarantineAtItsTime(t *testing.T) {
	v := New("self", "self-addr", nil, 4)
	t0 := time.Unix(100, 0)
	v.Step(t0, Topology{Members: []Member{{"a", "a-addr"}}})
	if o := v.Step(t0, Failed{ID: "a"}); !o.Changed || !o.Empty() {
		t.Fatalf("Failed: %+v, want a change and an empty Box", o)
	}
	if !v.Quarantining() {
		t.Fatal("a failed member's address is not quarantined")
	}
	v.Step(t0.Add(AddressQuarantine-time.Nanosecond), Blame{ID: "a", By: "test"})
	if !v.Quarantining() {
		t.Fatal("the quarantine ended before its time")
	}
	v.Step(t0.Add(AddressQuarantine), Leaving{ID: "nobody"})
	if v.Quarantining() {
		t.Fatal("the quarantine outlived its time")
	}
}
