package replica

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
)

// Limits on what a message may carry.
const (
	MaxNameLen  = 200
	MaxLabelLen = 256
	MaxHostLen  = 256
	// MaxReplicas bounds a barrier's replica list.
	MaxReplicas = 16
	// DefaultTakeoverAfter is the silence of the primary after which a
	// backup takes over when the options leave it 0.
	DefaultTakeoverAfter = time.Second
)

// ErrInvalidOptions is wrapped, with the policy's more specific error, by
// every options error of PolicyOptions.
var ErrInvalidOptions = policy.ErrInvalidOptions

// Millis converts a wire duration, saturating instead of overflowing.
func Millis(v int64) time.Duration {
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case v > limit:
		return math.MaxInt64
	case v < -limit:
		return math.MinInt64
	}
	return time.Duration(v) * time.Millisecond
}

// PolicyOptions converts wire options into policy options and validates
// them. Errors wrap policy.ErrInvalidOptions and a more specific policy
// error.
func PolicyOptions(o *messages.BarrierOptions) (policy.Options, error) {
	if o == nil {
		return policy.Options{}, fmt.Errorf("%w: %w: no options", policy.ErrInvalidOptions, policy.ErrBadMax)
	}
	p := policy.Options{
		MaxParticipants: int(o.GetMaxParticipants()),
		Timeout:         Millis(o.GetTimeoutMs()),
		MinPercent:      o.GetMinPercent(),
		MinWait:         Millis(o.GetMinWaitMs()),
		FireOnKnee:      o.GetFireOnKnee(),
		KneeWarmup:      int(o.GetKneeWarmup()),
		EntryCallback:   o.GetEntryCallback(),
		CallbackTimeout: Millis(o.GetCallbackTimeoutMs()),
	}
	switch o.GetLateMode() {
	case messages.BarrierLateMode_BARRIER_PASS_THROUGH:
		p.LateMode = policy.PassThrough
	case messages.BarrierLateMode_BARRIER_CATCH_UP:
		p.LateMode = policy.CatchUp
	default:
		p.LateMode = policy.LateMode(o.GetLateMode()) // rejected by Validate
	}
	if t := o.GetThrottle(); t != nil {
		p.Throttle = &policy.Throttle{Count: int(t.GetCount()), Percent: t.GetPercent(), Interval: Millis(t.GetIntervalMs())}
	}
	if s := o.GetSemaphore(); s != nil {
		p.Semaphore = &policy.Semaphore{Count: int(s.GetCount()), HolderTimeout: Millis(s.GetHolderTimeoutMs()),
			Adaptive: s.GetAdaptive(), AdaptiveMax: int(s.GetAdaptiveMax())}
	}
	if o.GetTakeoverAfterMs() < 0 {
		return policy.Options{}, fmt.Errorf("%w: %w: TakeoverAfter=%v", policy.ErrInvalidOptions, policy.ErrNegativeDuration, Millis(o.GetTakeoverAfterMs()))
	}
	if err := p.Validate(); err != nil {
		return policy.Options{}, err
	}
	return p, nil
}

// TakeoverAfter is the options' takeover silence, or the default.
func TakeoverAfter(o *messages.BarrierOptions) time.Duration {
	if d := Millis(o.GetTakeoverAfterMs()); d > 0 {
		return d
	}
	return DefaultTakeoverAfter
}

// CheckName validates a barrier name.
func CheckName(name string) *messages.Error {
	switch {
	case name == "":
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "empty barrier name")
	case len(name) > MaxNameLen:
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier name longer than %d bytes", MaxNameLen)
	case !utf8.ValidString(name):
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier name is not UTF-8")
	}
	return nil
}

// CheckLabel validates a label and its host.
func CheckLabel(label, host string) *messages.Error {
	switch {
	case label == "":
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "empty label")
	case len(label) > MaxLabelLen:
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "label longer than %d bytes", MaxLabelLen)
	case len(host) > MaxHostLen:
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "host longer than %d bytes", MaxHostLen)
	}
	return nil
}

// Peer turns a PID into its wire form.
func Peer(pid *actor.PID) *messages.BarrierPeer {
	if pid == nil {
		return nil
	}
	return &messages.BarrierPeer{Address: pid.GetAddress(), Id: pid.GetId()}
}

// PeerPID turns a wire peer into a PID (nil if unset).
func PeerPID(p *messages.BarrierPeer) *actor.PID {
	if p.GetId() == "" {
		return nil
	}
	return &actor.PID{Address: p.GetAddress(), Id: p.GetId()}
}

// policyError maps a policy event error to a typed error for the caller.
func policyError(err error, name, label string) *messages.Error {
	switch {
	case errors.Is(err, policy.ErrClosed):
		return messages.Errorf(messages.ErrorCode_DELETED, "barrier %q is closed", name)
	case errors.Is(err, policy.ErrEmptyLabel):
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "empty label")
	case errors.Is(err, policy.ErrDuplicateLabel):
		return messages.Errorf(messages.ErrorCode_CONFLICT, "label %q already entered barrier %q", label, name)
	case errors.Is(err, policy.ErrFull):
		return messages.Errorf(messages.ErrorCode_CAPACITY, "barrier %q is full: %v", name, err)
	case errors.Is(err, policy.ErrUnknownLabel):
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "release of %q, which never entered barrier %q", label, name)
	case errors.Is(err, policy.ErrNotHolding):
		return messages.Errorf(messages.ErrorCode_CONFLICT, "label %q does not hold semaphore %q (still waiting, or already released)", label, name)
	case errors.Is(err, policy.ErrNotSemaphore):
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q is not a semaphore barrier: nothing to release", name)
	}
	return messages.Errorf(messages.ErrorCode_INTERNAL, "barrier %q: %v", name, err)
}
