package barrier

import (
	"errors"
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/internal/barrier/tree"
	"github.com/hoplite-go/hoplite/messages"
)

// Option configures New (and, for Host and DefaultWait, Open).
type Option func(*config)

type config struct {
	o               messages.BarrierOptions
	timeout         time.Duration
	minWait         time.Duration
	callbackTimeout time.Duration
	takeover        time.Duration
	throttle        *throttle
	semaphore       bool
	semCount        int
	holderTimeout   time.Duration
	adaptive        bool
	adaptiveMax     int
	onEnter         func(Consultation) bool
	onFailure       func(Failure)
	replicas        int
	fanout          int
	fanoutSet       bool // Fanout was given; otherwise by TreeFromMembers
	host            string
	wait            time.Duration
	shaped          bool // a barrier option was given (not allowed on Open)
	errs            []error
}

type throttle struct {
	count   int
	percent float64
	every   time.Duration
}

func shape(f func(*config)) Option {
	return func(c *config) { c.shaped = true; f(c) }
}

// Max is the number of participants (labels): the barrier always fires
// once Max labels entered, and refuses more (CAPACITY). Required by New.
func Max(n int) Option {
	return shape(func(c *config) {
		if n < 0 || n > 1<<30 {
			c.errs = append(c.errs, fmt.Errorf("%w: %w: Max=%d", policy.ErrInvalidOptions, policy.ErrBadMax, n))
			return
		}
		c.o.MaxParticipants = int32(n)
	})
}

// Timeout fires the barrier this long after the first entry, whatever
// MinPercent and MinWait say.
func Timeout(d time.Duration) Option { return shape(func(c *config) { c.timeout = d }) }

// MinPercent fires the barrier once this percent (0..100) of Max entered
// and MinWait passed since the first entry. With FireOnKnee it only gates
// the knee detector.
func MinPercent(p float64) Option { return shape(func(c *config) { c.o.MinPercent = p }) }

// MinWait is the minimum time since the first entry before an early fire
// by percent or knee.
func MinWait(d time.Duration) Option { return shape(func(c *config) { c.minWait = d }) }

// FireOnKnee fires the barrier at the first acceptable knee of the
// arrivals (the paper's section 4 heuristic).
func FireOnKnee() Option { return shape(func(c *config) { c.o.FireOnKnee = true }) }

// KneeWarmup is the number of arrivals before the knee detector arms (0:
// the default, 8; else at least 2).
func KneeWarmup(n int) Option {
	return shape(func(c *config) { c.o.KneeWarmup = int32(max(min(n, 1<<30), -1)) })
}

// CatchUp makes a label that enters after the fire fail with ErrCatchUp
// instead of passing (the default is pass-through: Pass.Late).
func CatchUp() Option {
	return shape(func(c *config) { c.o.LateMode = messages.BarrierLateMode_BARRIER_CATCH_UP })
}

// Throttle releases count labels at once when the barrier fires, then
// count more every interval (FIFO).
func Throttle(count int, every time.Duration) Option {
	return shape(func(c *config) { c.throttle = &throttle{count: count, every: every} })
}

// ThrottlePercent is Throttle with a percent of Max per batch.
func ThrottlePercent(percent float64, every time.Duration) Option {
	return shape(func(c *config) { c.throttle = &throttle{percent: percent, every: every} })
}

// Semaphore makes a semaphore barrier: at most count labels hold the
// critical section at once; Enter returns when a label is admitted, and
// Pass.Release lets the next one in.
func Semaphore(count int) Option {
	return shape(func(c *config) { c.semaphore, c.semCount = true, count })
}

// HolderTimeout presumes a semaphore holder failed once it held the
// section this long: its slot goes to the next label, OnFailure hears of
// it, and its late Release fails with TIMEOUT. Needs Semaphore.
func HolderTimeout(d time.Duration) Option { return shape(func(c *config) { c.holderTimeout = d }) }

// Adaptive lets a semaphore's concurrency move between 1 and limit (0:
// Max) with the median of recent holding times (the paper's adaptive
// release). Needs Semaphore.
func Adaptive(limit int) Option {
	return shape(func(c *config) { c.adaptive, c.adaptiveMax = true, limit })
}

// OnEnter sets the entry callback (setEnterCallback): it is asked, with
// the barrier's default answer, at each entry, when a knee or the percent
// threshold is reached, and at least every timeout (0: no periodic call);
// true fires the barrier now, false vetoes. Max and Timeout still fire on
// their own. The callback runs on this handle's actor: it must not block
// on this handle.
func OnEnter(f func(Consultation) bool, timeout time.Duration) Option {
	return shape(func(c *config) {
		if f == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: %w: nil OnEnter callback", policy.ErrInvalidOptions, policy.ErrConflictingOption))
			return
		}
		c.onEnter, c.callbackTimeout = f, timeout
		c.o.EntryCallback = true
	})
}

// OnFailure is called (on this handle's actor) for each participant the
// manager could not serve: gone before its release was delivered, or a
// semaphore holder that timed out or failed.
func OnFailure(f func(Failure)) Option { return shape(func(c *config) { c.onFailure = f }) }

// Replicas is the number of barrier managers (default 2, at most the live
// nodes): the primary on the name's home node and backups on the next
// live nodes.
func Replicas(k int) Option { return shape(func(c *config) { c.replicas = k }) }

// Fanout is the fan-out of the tree of members that the barrier's
// arrivals combine up and its outcomes come down; 0 sends every Enter
// straight to the replicas. By default a barrier of a cluster of
// TreeFromMembers members or more combines up a tree of fan-out 4, and
// one of fewer sends straight: on a few members the tree's extra hop
// costs more than the messages it saves (docs/architecture.md, "Partial
// barriers").
func Fanout(k int) Option { return shape(func(c *config) { c.fanout, c.fanoutSet = k, true }) }

// TreeFromMembers is the cluster size from which a barrier without
// Fanout combines its arrivals up a tree: below it the manager takes
// every arrival faster than a tree's extra hop would (the simulator's
// and the embedded cluster's figures are in docs/architecture.md,
// "Partial barriers").
const TreeFromMembers = 32

// TakeoverAfter is how long a backup hears participants but not the
// primary before it takes over (default 1s).
func TakeoverAfter(d time.Duration) Option { return shape(func(c *config) { c.takeover = d }) }

// Host is the host name this handle reports with its entries (Hosts).
func Host(name string) Option { return func(c *config) { c.host = name } }

// DefaultWait bounds the calls of this handle whose context has no
// deadline (default 1 minute).
func DefaultWait(d time.Duration) Option { return func(c *config) { c.wait = d } }

// Consultation is what the entry callback is asked.
type Consultation = participant.Consultation

// Failure is a participant the manager could not serve.
type Failure = participant.Failure

const defaultWait = time.Minute

func newConfig(opts []Option) *config {
	c := &config{replicas: 2, fanout: tree.DefaultFanout, wait: defaultWait}
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
	return c
}

// millis converts a duration to whole milliseconds for the wire, rounding
// away from zero so that a small positive or negative value keeps its sign.
func millis(d time.Duration) int64 {
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond > 0 {
		ms++
	} else if d%time.Millisecond < 0 {
		ms--
	}
	return ms
}

// options builds and validates the wire options.
func (c *config) options() (*messages.BarrierOptions, error) {
	if len(c.errs) > 0 {
		return nil, invalid(c.errs[0])
	}
	o := &c.o
	o.TimeoutMs, o.MinWaitMs, o.CallbackTimeoutMs, o.TakeoverAfterMs = millis(c.timeout), millis(c.minWait), millis(c.callbackTimeout), millis(c.takeover)
	if t := c.throttle; t != nil {
		o.Throttle = &messages.BarrierThrottle{Count: int32(max(min(t.count, 1<<30), -1)), Percent: t.percent, IntervalMs: millis(t.every)}
	}
	if c.semaphore {
		o.Semaphore = &messages.BarrierSemaphore{Count: int32(max(min(c.semCount, 1<<30), -1)), HolderTimeoutMs: millis(c.holderTimeout),
			Adaptive: c.adaptive, AdaptiveMax: int32(max(min(c.adaptiveMax, 1<<30), -1))}
	} else if c.holderTimeout != 0 || c.adaptive {
		return nil, invalid(fmt.Errorf("%w: %w: HolderTimeout and Adaptive need Semaphore", policy.ErrInvalidOptions, policy.ErrConflictingOption))
	}
	if c.replicas < 1 || c.replicas > maxReplicas {
		return nil, invalid(fmt.Errorf("%w: Replicas=%d (1..%d)", policy.ErrInvalidOptions, c.replicas, maxReplicas))
	}
	if c.fanout != 0 && (c.fanout < 2 || c.fanout > tree.MaxFanout) {
		return nil, invalid(fmt.Errorf("%w: Fanout=%d (0, or 2..%d)", policy.ErrInvalidOptions, c.fanout, tree.MaxFanout))
	}
	if c.wait <= 0 {
		return nil, invalid(fmt.Errorf("%w: %w: DefaultWait=%v", policy.ErrInvalidOptions, policy.ErrNegativeDuration, c.wait))
	}
	if _, err := policyOptions(o); err != nil {
		return nil, invalid(err)
	}
	return o, nil
}

// invalidError is an INVALID_ARGUMENT *messages.Error that also wraps the
// policy's specific error (errors.Is works with either).
type invalidError struct {
	e     *messages.Error
	cause error
}

func (x *invalidError) Error() string   { return x.e.Error() }
func (x *invalidError) Unwrap() []error { return []error{x.e, x.cause} }

func invalid(err error) error {
	var m *messages.Error
	if errors.As(err, &m) {
		return err
	}
	return &invalidError{e: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%v", err), cause: err}
}
