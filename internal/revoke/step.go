package revoke

import "time"

// Event is what a Broadcaster steps on: Originate, Received or
// Reoverlay.
type Event interface{ revokeEvent() }

// Originate: this member is the first to learn of a failure (or
// revokes). The notice goes to every neighbour and is delivered here;
// one already known (another member's wave got here first) was
// forwarded and delivered then, and the decision is empty.
type Originate struct{ Notice Notice }

// Received: a copy of Notice arrived from member From. The first copy
// goes to every current neighbour but From and is delivered here; a
// duplicate yields an empty decision.
type Received struct {
	From   string
	Notice Notice
}

// Reoverlay: the topology changed to Overlay (same self); recent
// notices go to the neighbours it gains (see setOverlay).
type Reoverlay struct{ Overlay *Overlay }

func (Originate) revokeEvent() {}
func (Received) revokeEvent()  {}
func (Reoverlay) revokeEvent() {}

// Step applies one event. The broadcast needs no clock: now is taken
// for the one contract every core keeps, and the decision arms no
// timer.
func (b *Broadcaster) Step(_ time.Time, ev Event) Decision {
	switch e := ev.(type) {
	case Originate:
		return b.originate(e.Notice)
	case Received:
		return b.receive(e.From, e.Notice)
	case Reoverlay:
		return b.setOverlay(e.Overlay)
	}
	return Decision{}
}
