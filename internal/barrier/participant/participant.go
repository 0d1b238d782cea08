// Package participant is the contract between a barrier handle (package
// barrier, the API applications call) and its participant actor (in
// internal/actors/barrieractor, the shell that talks to the replicas): the
// requests the handle sends its actor, the answers that come back on
// channels, and the controller's callbacks. Both sides import it; neither imports the other,
// so the API carries no actor shell and the shell no API.
package participant

import (
	"sync/atomic"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/barrier/handle"
	"github.com/hoplite-go/hoplite/messages"
)

// The messages a barrier handle sends its participant actor. They never
// cross a process: the replies travel on channels.
type (
	// Setup names the barrier's replicas once it was created or opened.
	Setup struct {
		Replicas  []*actor.PID
		Max       int
		Semaphore bool
		// Tree is the barrier's combining tree (nil: none).
		Tree *messages.BarrierTreeShape
	}
	// EnterRequest enters Label; its outcome comes back on Reply.
	EnterRequest struct {
		ID          uint64
		Label, Host string
		Reply       chan<- EnterResult
	}
	// CallRequest sends Build's message to every replica; the acting
	// primary's answer (or nil if the handle stops) comes back on Reply.
	CallRequest struct {
		ID    uint64
		Build func(id uint64, rank int32) proto.Message
		Reply chan<- proto.Message
	}
	// CancelRequest withdraws a waiting Enter (Label set) or call; Done,
	// if not nil, is closed once it is withdrawn.
	CancelRequest struct {
		ID    uint64
		Label string
		Done  chan struct{}
	}
)

// Outcome is how an Enter passed.
type Outcome = handle.Outcome

// The outcomes of an Enter.
const (
	// Fired: the barrier fired with the label in it.
	Fired = handle.Fired
	// Late: the label entered after the fire and passed through.
	Late = handle.Late
	// CatchUp: the label entered after the fire of a catch-up barrier,
	// and does not pass.
	CatchUp = handle.CatchUp
)

// EnterResult answers an EnterRequest: an outcome, or Err.
type EnterResult struct {
	Kind   Outcome
	Reason string
	Err    error
}

// Consultation is what the entry callback is asked.
type Consultation struct {
	// Label and Host of the entry that caused it; empty when it was caused
	// by time (a knee, MinWait, or the callback timeout).
	Label, Host string
	// Default is what the barrier would do without the callback: fire now
	// or not; Reason is the rule behind a true Default.
	Default bool
	Reason  string
	// Knee: a knee in the arrivals just became acceptable, after
	// KneeArrivals arrivals.
	Knee         bool
	KneeArrivals int
	// Entered is the number of labels entered so far.
	Entered int
}

// Failure is a participant the manager could not serve.
type Failure struct {
	Barrier, Label, Host, Reason string
}

// Counters count what a handle ignored; the handle reads them.
type Counters struct{ Dup, Conflict, Orphan, TimedOut atomic.Int64 }

// Config configures the participant actor of one handle.
type Config struct {
	Name      string
	OnEnter   func(Consultation) bool
	OnFailure func(Failure)
	Counters  *Counters
	// Gone, if not nil, is closed when the actor has stopped: a handle
	// that withdraws a call waits for the withdrawal or for this, never
	// for a message a stopped actor cannot answer.
	Gone chan struct{}
}
