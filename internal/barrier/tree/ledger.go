package tree

import (
	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
)

// Ledger is the root's memory of the arrivals it handed to the policy:
// where each label entered and whom to answer, so that the policy's
// decisions, which name labels, can be sent down the tree. It holds at
// most max labels (the barrier's MaxParticipants: the policy refuses
// more).
type Ledger struct {
	max int
	at  map[string]*messages.BarrierArrival
}

// NewLedger returns an empty ledger of at most max labels.
func NewLedger(max int) *Ledger {
	return &Ledger{max: max, at: map[string]*messages.BarrierArrival{}}
}

// Note records an arrival the policy accepted.
func (l *Ledger) Note(a *messages.BarrierArrival) {
	if _, ok := l.at[a.GetLabel()]; ok || len(l.at) >= l.max {
		return
	}
	l.at[a.GetLabel()] = a
}

// Arrival is label's recorded arrival (nil if none).
func (l *Ledger) Arrival(label string) *messages.BarrierArrival { return l.at[label] }

// Outcomes turns a policy decision into outcomes addressed to the
// positions the labels entered at, in the decision's order; epoch is
// the primary's. A label the ledger does not know is left out.
func (l *Ledger) Outcomes(d policy.Decision, reason string, epoch uint64) []*messages.BarrierOutcome {
	var out []*messages.BarrierOutcome
	add := func(labels []string, kind messages.BarrierOutcomeKind) {
		for _, label := range labels {
			a := l.at[label]
			if a == nil {
				continue
			}
			o := &messages.BarrierOutcome{Label: label, Leaf: a.GetLeaf(), Kind: kind, Reply: a.GetReply()}
			if kind == messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED {
				o.Reason, o.Epoch = reason, epoch
			}
			out = append(out, o)
		}
	}
	add(d.Release, messages.BarrierOutcomeKind_BARRIER_OUTCOME_FIRED)
	add(d.LateFire, messages.BarrierOutcomeKind_BARRIER_OUTCOME_LATE_FIRE)
	add(d.CatchUp, messages.BarrierOutcomeKind_BARRIER_OUTCOME_CATCH_UP)
	add(d.TimedOut, messages.BarrierOutcomeKind_BARRIER_OUTCOME_TIMED_OUT)
	return out
}
