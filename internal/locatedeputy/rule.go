// Package locatedeputy is the rule by which a Locate deputy sends one
// object's Locates on to the object's directory shard: alone, or
// together in one batch. It is a pure state machine: its caller (a
// member's deputy, the simulator's) holds the Locates themselves, reads
// the clock, arms the timer the rule asks for and sends what it says.
//
// The rule: a Locate goes on alone when nothing else of its object is
// out. Those that come while one is out are queued: once an answer has
// brought the object's bytes they wait Window for more, then go on
// together in one batch; before, they wait for that answer, at most
// ProbeWait, then go alone. An object whose home left one of a batch's
// Locates, or whose answer named a sender, goes alone for StreamedFor;
// one whose first answer did not come within ProbeWait (not there yet:
// its Locate waits at the shard) goes alone until an answer brings its
// bytes.
package locatedeputy

import (
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Window is how long a Locate of an object the home answered with its
// bytes waits, when others of it are out, for more to go with it.
const Window = 200 * time.Microsecond

// ProbeWait is how long the Locates that come while an object's first is
// out wait for its answer to say whether the object goes in batches.
// The simulator's 1,024 hosts need 1 ms: the first answers of a 1 KiB
// broadcast come back within it (at 0.5 ms its Locates went alone, 12.8
// ms in all); an AllReduce's result, whose Locates wait for it at the
// shard, holds the first Locates that follow its probe for that long
// (see directory.DeputyMinMembers).
const ProbeWait = time.Millisecond

// StreamedFor is how long an object goes alone after the home left one of
// its Locates or named a sender for one.
const StreamedFor = time.Second

// Object is a deputy's state of one object's Locates.
type Object struct {
	out, queued int
	// inline: the home answered the object with its bytes. slow: the
	// answer that was to say so did not come within ProbeWait.
	inline, slow bool
	streamedAt   time.Time // zero: never
}

// Wait is which wait a queued Locate asks for.
type Wait int

const (
	// NoWait: none (the queue's first asked for it).
	NoWait Wait = iota
	// WaitWindow: Window, the object goes in batches.
	WaitWindow
	// WaitProbe: ProbeWait, for the answer that says how it goes.
	WaitProbe
)

// Arrive takes a Locate that came at now. alone: send it on at once.
// Otherwise it is queued; wait asks for a timer (TimerFired when it
// ends), flush for the queue to go now (Flush): it holds
// messages.MaxLocateBatch.
func (o *Object) Arrive(now time.Time) (alone bool, wait Wait, flush bool) {
	if o.streamed(now) || o.slow || (o.out == 0 && o.queued == 0) {
		o.out++
		return true, NoWait, false
	}
	o.queued++
	switch {
	case o.queued >= messages.MaxLocateBatch:
		return false, NoWait, true
	case o.queued == 1 && o.inline:
		return false, WaitWindow, false
	case o.queued == 1:
		return false, WaitProbe, false
	}
	return false, NoWait, false
}

// Leave takes a queued Locate out (its receiver left).
func (o *Object) Leave() {
	if o.queued > 0 {
		o.queued--
	}
}

// TimerFired is the end of the wait Arrive asked for: the queue goes now
// (Flush). An object still without an answer goes alone from now on.
func (o *Object) TimerFired() {
	if !o.inline {
		o.slow = true
	}
}

// Flush sends the queue on at now: n Locates, in one batch if batch
// (out from now), else each alone, for which the caller calls SentAlone
// as it sends it (a Locate whose receiver left meanwhile is not sent).
func (o *Object) Flush(now time.Time) (n int, batch bool) {
	n, o.queued = o.queued, 0
	if o.inline && !o.streamed(now) {
		o.out += n
		return n, true
	}
	return n, false
}

// AloneAnswered takes the answer to a Locate sent alone (ok false: the
// call failed). flush: that answer says how the object goes, and the
// queue that waited for it goes now (Flush).
func (o *Object) AloneAnswered(now time.Time, r *messages.LocateReply, ok bool) (flush bool) {
	o.out--
	if !ok || r.GetError() != nil {
		return false
	}
	if r.GetHasInline() {
		o.inline, o.slow = true, false
	} else {
		o.streamedAt = now
	}
	return o.queued > 0
}

// BatchAnswered takes the answer to a batch of n Locates: left says the
// home left some of them (or the batch failed), which the caller sends
// alone (SentAlone).
func (o *Object) BatchAnswered(now time.Time, n int, left bool) {
	o.out -= n
	if left {
		o.streamedAt = now
	}
}

// SentAlone counts a Locate the caller sends alone outside Arrive: one
// of a queue Flush sent alone, or one the home left of a batch.
func (o *Object) SentAlone() { o.out++ }

// Idle reports whether the deputy may forget o: nothing out or queued,
// and no streaming that still holds (what else it learned, it learns
// again).
func (o *Object) Idle(now time.Time) bool {
	return o.out == 0 && o.queued == 0 && !o.streamed(now)
}

func (o *Object) streamed(now time.Time) bool {
	return !o.streamedAt.IsZero() && now.Sub(o.streamedAt) < StreamedFor
}
