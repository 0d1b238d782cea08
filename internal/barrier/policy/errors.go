package policy

import "errors"

// Option errors. Every error returned by Options.Validate or
// KneeConfig.Validate wraps ErrInvalidOptions and one of the more specific
// errors below, so errors.Is works with either.
var (
	ErrInvalidOptions    = errors.New("policy: invalid barrier options")
	ErrBadMax            = errors.New("policy: MaxParticipants must be at least 1")
	ErrBadPercent        = errors.New("policy: percent must be within 0..100")
	ErrNegativeDuration  = errors.New("policy: durations must not be negative")
	ErrBadThrottle       = errors.New("policy: throttle needs a positive interval and exactly one of count or percent")
	ErrBadSemaphore      = errors.New("policy: semaphore count must be at least 1")
	ErrBadLateMode       = errors.New("policy: unknown late mode")
	ErrBadWarmup         = errors.New("policy: knee warm-up must be 0 (default) or at least 2")
	ErrBadExpected       = errors.New("policy: expected participants must not be negative, and must be set when a minimum percent is")
	ErrConflictingOption = errors.New("policy: options conflict")
)

// Event errors. An event that fails leaves the barrier unchanged.
var (
	ErrClosed         = errors.New("policy: barrier is closed")
	ErrEmptyLabel     = errors.New("policy: empty label")
	ErrDuplicateLabel = errors.New("policy: label already entered")
	ErrFull           = errors.New("policy: more distinct labels than MaxParticipants")
	ErrUnknownLabel   = errors.New("policy: label never entered")
	ErrNotHolding     = errors.New("policy: label does not hold the semaphore")
	ErrNotSemaphore   = errors.New("policy: operation needs a semaphore barrier")
	ErrSemaphore      = errors.New("policy: operation not available on a semaphore barrier")
	ErrAlreadyFired   = errors.New("policy: barrier already fired")
	ErrNoCallback     = errors.New("policy: barrier has no entry callback")
	ErrUnknownEvent   = errors.New("policy: not an event of the barrier")
)
