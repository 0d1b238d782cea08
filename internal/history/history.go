// Package history checks a recorded history of Hoplite calls and faults
// against the promises of the fault model (docs/fault-model.md): a model
// of immutable objects with Delete, eviction, loss and Reduce.
//
// A chaos suite records every call's start and end (Op) and every fault
// it injected (Event), then asks Check which answers the model does not
// allow. Who held a complete copy of an object is derived from the
// history itself: the creator once its Put returned, each caller of a Get
// once the Get returned the exact bytes. The package is a pure core: it
// reads no clock and does no I/O, so a hand-made history is checked the
// same way a recorded one is.
package history

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// OpKind is the API call an Op made.
type OpKind int

const (
	// Put creates Object with bytes of fingerprint Sum.
	Put OpKind = iota
	// Get reads Object; an OK answer returned bytes of fingerprint Sum.
	Get
	// Delete frees every copy of Object.
	Delete
	// Reduce reduces Num of Sources into the target Object.
	Reduce
)

// String names the call.
func (k OpKind) String() string {
	switch k {
	case Put:
		return "put"
	case Get:
		return "get"
	case Delete:
		return "delete"
	case Reduce:
		return "reduce"
	}
	return fmt.Sprintf("op(%d)", int(k))
}

// Op is one call as it ran: what was asked, of which member, when it
// began and answered, and the answer.
type Op struct {
	// ID names the op in violations; Label describes it for a reader.
	ID    int
	Label string
	Kind  OpKind
	// Member is the member whose client made the call.
	Member int
	// Object is the id a Put, Get or Delete names, or a Reduce's target.
	Object string
	// Shard is the directory shard of Object; Hosts are the members that
	// hosted it when the call began and when it answered (-1: unknown).
	Shard int
	Hosts [2]int
	// Sum is the fingerprint of a Put's bytes, or of the bytes an OK Get
	// returned. Size is their length (a Reduce: its target's).
	Sum  uint64
	Size int64
	// Sources, Num and All describe a Reduce (All: an AllReduce);
	// Reduced and Unreduced are its OK answer.
	Sources   []string
	Num       int
	All       bool
	Reduced   []string
	Unreduced []string
	// Begin and End are when the call was made and when it answered;
	// Deadline is its context's. Canceled, when set, is when the caller
	// canceled its context.
	Begin, End, Deadline time.Time
	Canceled             time.Time
	// Need is the least time the call takes on this machine as measured
	// while it ran (round trips between members times the trips it
	// makes, plus the transfer): a deadline shorter than Need from Begin
	// (or from when the object became readable) explains a TIMEOUT.
	Need time.Duration
	// Code is the answer: OK or the typed error's code.
	Code messages.ErrorCode
	// Abandoned: a Reduce that its coordinator answered CANCELED at its
	// caller's cancel, before its commit (reduction.AbandonedAtCancel).
	// Nothing of it is readable after that answer. A CANCELED the
	// caller's own context made leaves its outcome unknown.
	Abandoned bool
}

// EventKind is a fault the schedule injected, or what a member reported
// of its copies.
type EventKind int

const (
	// Kill stops Member abruptly: every copy it held is gone.
	Kill EventKind = iota
	// Restart starts Member again, with an empty store.
	Restart
	// Pause stops Member from Begin to End (SIGSTOP): while paused it is
	// cut off, its copies unreachable.
	Pause
	// CrashStore crashes Member's store node actor; its supervisor
	// restarts it, and the store survives.
	CrashStore
	// CrashShard crashes directory shard Shard; it restarts empty and
	// the store nodes republish to it.
	CrashShard
	// Stall holds Member's fetch of Object from Begin to End.
	Stall
	// Evict says Member dropped its copy of Object at Begin (it
	// unpublished its location). A creator's pinned copy goes only with
	// a Delete, so an Evict of it is not a loss.
	Evict
)

// String names the fault.
func (k EventKind) String() string {
	switch k {
	case Kill:
		return "kill"
	case Restart:
		return "restart"
	case Pause:
		return "pause"
	case CrashStore:
		return "crash store"
	case CrashShard:
		return "crash shard"
	case Stall:
		return "stall"
	case Evict:
		return "evict"
	}
	return fmt.Sprintf("event(%d)", int(k))
}

// Event is one fault as it ran, from Begin to End.
type Event struct {
	Kind   EventKind
	Member int
	Shard  int
	Object string
	// Begin and End bound the fault: a kill from its start until the
	// member was gone, a pause or a stall for as long as it held.
	Begin, End time.Time
}

// String says what the fault did, to whom and when (on the clock).
func (e Event) String() string {
	switch e.Kind {
	case CrashShard:
		return fmt.Sprintf("%s %d at %s", e.Kind, e.Shard, e.Begin.Format("15:04:05.000"))
	case Stall, Evict:
		return fmt.Sprintf("%s %s on member %d at %s", e.Kind, e.Object, e.Member, e.Begin.Format("15:04:05.000"))
	}
	return fmt.Sprintf("%s member %d at %s", e.Kind, e.Member, e.Begin.Format("15:04:05.000"))
}

// History is what a run recorded.
type History struct {
	Ops    []Op
	Events []Event
}
