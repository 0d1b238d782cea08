package handle

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// Events a Participant steps on beside a replica's
// *messages.BarrierRefused and its own timer, Reask.
type (
	// Enter enters Label on Host for the call ID.
	Enter struct {
		ID          uint64
		Label, Host string
	}
	// Call sends Msgs[rank] to each replica for the call ID.
	Call struct {
		ID   uint64
		Msgs []proto.Message
	}
	// Passed is a replica's news that Label passed (fired, late or
	// caught up), with Reason.
	Passed struct {
		Label  string
		Kind   Outcome
		Reason string
	}
	// Answered is a replica's answer Msg to the call ID.
	Answered struct {
		ID  uint64
		Msg proto.Message
	}
	// Stop ends every waiting call: the handle stopped.
	Stop struct{}
)

// Step applies one event at now: Enter, Call, Passed, a replica's
// *messages.BarrierRefused, Answered, Stop, or the Reask timer coming
// back. Any other event asks for nothing.
func (p *Participant) Step(now time.Time, ev any) Step {
	switch e := ev.(type) {
	case Enter:
		return p.onEnter(now, e.ID, e.Label, e.Host)
	case Reask:
		return p.onReask(now)
	case Call:
		return p.onCall(now, e.ID, e.Msgs)
	case Passed:
		return p.onOutcome(e.Label, e.Kind, e.Reason)
	case *messages.BarrierRefused:
		return p.onRefused(e)
	case Answered:
		return p.onAnswered(e.ID, e.Msg)
	case Stop:
		return p.onStop()
	}
	return Step{}
}
