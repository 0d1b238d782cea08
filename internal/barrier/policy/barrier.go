package policy

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
)

// LateMode says what happens to a label that enters after the barrier fired.
type LateMode int

const (
	// PassThrough releases a late label on arrival (LATE_FIRE). On a
	// throttled barrier it joins the release queue and leaves at the
	// throttled pace, still marked late.
	PassThrough LateMode = iota
	// CatchUp tells a late label to catch up (CATCH_UP): it does not pass.
	CatchUp
)

func (m LateMode) String() string {
	switch m {
	case PassThrough:
		return "pass-through"
	case CatchUp:
		return "catch-up"
	}
	return fmt.Sprintf("LateMode(%d)", int(m))
}

// FireReason says why a barrier fired.
type FireReason int

const (
	NotFired    FireReason = iota
	FireMax                // MaxParticipants entered
	FireTimeout            // Timeout passed since the first entry
	FirePercent            // MinPercent entered and MinWait passed
	FireKnee               // an acceptable knee in the arrivals (FireOnKnee)
	FireForced             // ForceFire (the shell's entry callback said so)
)

func (r FireReason) String() string {
	switch r {
	case NotFired:
		return "not-fired"
	case FireMax:
		return "max"
	case FireTimeout:
		return "timeout"
	case FirePercent:
		return "percent"
	case FireKnee:
		return "knee"
	case FireForced:
		return "forced"
	}
	return fmt.Sprintf("FireReason(%d)", int(r))
}

// Throttle configures throttled release (the paper's ThrottleBarrier):
// once the barrier fires, Count labels (or Percent of MaxParticipants,
// rounded up, at least one) leave in FIFO order at once and then every
// Interval. Exactly one of Count and Percent must be set.
type Throttle struct {
	Count    int
	Percent  float64
	Interval time.Duration
}

// Semaphore configures a semaphore barrier (the paper's SemaphoreBarrier):
// no firing; labels are admitted in FIFO order as long as fewer than the
// concurrency level hold the critical section, and each holder leaves with
// Barrier.Release.
type Semaphore struct {
	// Count is the number of holders allowed at once (the starting level
	// when Adaptive). At least 1.
	Count int
	// HolderTimeout, if positive, presumes a holder failed once it has held
	// the section that long: its slot is freed and it is reported in
	// Decision.TimedOut.
	HolderTimeout time.Duration
	// Adaptive lets the Adaptive controller move the level after each
	// release, between 1 and AdaptiveMax.
	Adaptive bool
	// AdaptiveMax caps the level; 0 means MaxParticipants.
	AdaptiveMax int
}

// Options configure a Barrier. The zero value of every optional field means
// "off": with only MaxParticipants set the barrier is a traditional one.
type Options struct {
	// MaxParticipants is the number of participants; the barrier always
	// fires when this many labels have entered, and never accepts more
	// distinct labels (ErrFull). At least 1.
	MaxParticipants int
	// Timeout, if positive, fires the barrier this long after the first
	// entry, whatever MinPercent and MinWait say.
	Timeout time.Duration
	// MinPercent (0..100), if positive, fires the barrier once this percent
	// of MaxParticipants (rounded up) entered and MinWait passed since the
	// first entry. With FireOnKnee, MinPercent and MinWait instead gate the
	// knee detector and do not fire the barrier by themselves.
	MinPercent float64
	// MinWait is the minimum time since the first entry before an early
	// release by percent (or knee).
	MinWait time.Duration
	// FireOnKnee fires the barrier on the first acceptable knee.
	FireOnKnee bool
	// KneeWarmup is KneeConfig.Warmup for the knee detector.
	KneeWarmup int
	// LateMode says what happens to labels entering after the fire.
	LateMode LateMode
	// Throttle, if set, releases labels at a throttled pace after the fire.
	Throttle *Throttle
	// Semaphore, if set, makes this a semaphore barrier. It excludes
	// Timeout, MinPercent, MinWait, FireOnKnee, Throttle, CatchUp and the
	// entry callback.
	Semaphore *Semaphore
	// EntryCallback says the shell runs an entry callback (the paper's
	// setEnterCallback). The barrier then never fires by percent or knee on
	// its own: each Enter, each newly acceptable knee, each percent
	// threshold reached by MinWait, and every CallbackTimeout without one
	// of those, produces a Decision.Consult carrying the default answer;
	// the shell answers with ForceFire (fire) or Veto (don't). MaxParticipants
	// and Timeout still fire on their own. Knee detection runs when either
	// FireOnKnee or EntryCallback is set.
	EntryCallback bool
	// CallbackTimeout is the longest time between two consultations
	// (the timeout argument of setEnterCallback). Needs EntryCallback.
	CallbackTimeout time.Duration
}

// Validate reports whether the options are usable. Every error wraps
// ErrInvalidOptions and a more specific error.
func (o Options) Validate() error {
	if o.MaxParticipants < 1 {
		return invalid(ErrBadMax, "MaxParticipants=%d", o.MaxParticipants)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Timeout", o.Timeout}, {"MinWait", o.MinWait}, {"CallbackTimeout", o.CallbackTimeout}} {
		if d.v < 0 {
			return invalid(ErrNegativeDuration, "%s=%v", d.name, d.v)
		}
	}
	if !validPercent(o.MinPercent) {
		return invalid(ErrBadPercent, "MinPercent=%v", o.MinPercent)
	}
	if o.KneeWarmup < 0 || o.KneeWarmup == 1 {
		return invalid(ErrBadWarmup, "KneeWarmup=%d", o.KneeWarmup)
	}
	if o.LateMode != PassThrough && o.LateMode != CatchUp {
		return invalid(ErrBadLateMode, "LateMode=%d", int(o.LateMode))
	}
	if o.CallbackTimeout > 0 && !o.EntryCallback {
		return invalid(ErrConflictingOption, "CallbackTimeout needs EntryCallback")
	}
	if t := o.Throttle; t != nil {
		if t.Interval < 0 {
			return invalid(ErrNegativeDuration, "Throttle.Interval=%v", t.Interval)
		}
		if !validPercent(t.Percent) {
			return invalid(ErrBadPercent, "Throttle.Percent=%v", t.Percent)
		}
		if t.Interval == 0 || t.Count < 0 || (t.Count == 0) == (t.Percent == 0) {
			return invalid(ErrBadThrottle, "Throttle=%+v", *t)
		}
	}
	if s := o.Semaphore; s != nil {
		if s.Count < 1 {
			return invalid(ErrBadSemaphore, "Semaphore.Count=%d", s.Count)
		}
		if s.HolderTimeout < 0 {
			return invalid(ErrNegativeDuration, "Semaphore.HolderTimeout=%v", s.HolderTimeout)
		}
		if s.AdaptiveMax < 0 || (s.AdaptiveMax > 0 && s.AdaptiveMax < s.Count) {
			return invalid(ErrBadSemaphore, "Semaphore.AdaptiveMax=%d (Count=%d)", s.AdaptiveMax, s.Count)
		}
		if s.AdaptiveMax > 0 && !s.Adaptive {
			return invalid(ErrConflictingOption, "Semaphore.AdaptiveMax needs Semaphore.Adaptive")
		}
		if o.Throttle != nil || o.Timeout > 0 || o.MinPercent > 0 || o.MinWait > 0 ||
			o.FireOnKnee || o.EntryCallback || o.LateMode != PassThrough {
			return invalid(ErrConflictingOption, "a semaphore barrier takes no Timeout, MinPercent, MinWait, FireOnKnee, Throttle, CatchUp or EntryCallback")
		}
	}
	return nil
}

// Consultation asks the shell to run its entry callback.
type Consultation struct {
	// Label and Host of the entry that caused it; empty when it was caused
	// by time (a knee, MinWait, or CallbackTimeout).
	Label, Host string
	// Default is what the barrier would do without a callback: fire now or
	// not. Reason is the rule behind a true Default.
	Default bool
	Reason  FireReason
	// Knee is set when a knee just became acceptable.
	Knee *KneePoint
}

// Decision is what an event asks the shell to do: the policy's own
// outcome beside the Box, whose one timer (a Tick at NextDeadline, when
// there is one) asks for the next Step.
type Decision struct {
	outbox.Box
	// Err is why the event was refused (the barrier is unchanged and
	// nothing else is set): ErrClosed, ErrDuplicateLabel, ...
	Err error
	// Fired is true when this event fired the barrier, for Reason.
	Fired  bool
	Reason FireReason
	// Release lists labels to send FIRE now, in FIFO order (on a semaphore
	// barrier: labels admitted into the critical section).
	Release []string
	// LateFire lists late labels released now (pass-through).
	LateFire []string
	// CatchUp lists late labels to send CATCH_UP.
	CatchUp []string
	// TimedOut lists semaphore holders presumed failed; their slots are free.
	TimedOut []string
	// Knees found during this event, accepted or not.
	Knees []KneePoint
	// Consult, if set, asks the shell to run its entry callback and answer
	// with ForceFire or Veto.
	Consult *Consultation
}

// Next is when the Box's timer asks for the next Tick: NextDeadline
// after the event (zero: no timer needed).
func (d Decision) Next() time.Time {
	for _, t := range d.Timers {
		if _, ok := t.Msg.(Tick); ok {
			return t.At
		}
	}
	return time.Time{}
}

// Event is what a Barrier steps on: Enter, Tick, Release, ForceFire or
// Veto.
type Event interface{ policyEvent() }

type (
	// Enter: label (on host) reached the barrier.
	Enter struct{ Label, Host string }
	// Tick: time has come; timeouts, knees, MinWait, throttled batches
	// and holder timeouts due by now take effect. It is the message of
	// the Decision's timer.
	Tick struct{}
	// Release: label left a semaphore barrier's critical section. A
	// release that arrives when the holder's timeout is due but not yet
	// processed by a Tick is accepted: the holder did not fail.
	Release struct{ Label string }
	// ForceFire: the shell's entry callback answered true, so the barrier
	// fires now (if a timeout or other rule due by now fires it first,
	// that reason is reported instead).
	ForceFire struct{}
	// Veto: the shell's entry callback answered false; the barrier does
	// not fire, and the CallbackTimeout clock restarts at now.
	Veto struct{}
)

func (Enter) policyEvent()     {}
func (Tick) policyEvent()      {}
func (Release) policyEvent()   {}
func (ForceFire) policyEvent() {}
func (Veto) policyEvent()      {}

// Step applies one event at now. A refused event's Decision holds only
// its Err; any other holds a Tick timer at NextDeadline when there is
// one.
func (b *Barrier) Step(now time.Time, ev Event) Decision {
	var d Decision
	var err error
	switch e := ev.(type) {
	case Enter:
		d, err = b.enter(now, e.Label, e.Host)
	case Tick:
		d = b.tick(now)
	case Release:
		d, err = b.release(now, e.Label)
	case ForceFire:
		d, err = b.forceFire(now)
	case Veto:
		d, err = b.veto(now)
	default:
		err = fmt.Errorf("%w: %T", ErrUnknownEvent, ev)
	}
	if err != nil {
		return Decision{Err: err}
	}
	if next := b.NextDeadline(); !next.IsZero() {
		d.After(next, Tick{})
	}
	return d
}

// Passage records one label that passed the barrier.
type Passage struct {
	Label, Host string
	At          time.Time // when it was released
	Late        bool
}

type entryState int

const (
	waiting entryState = iota
	passed
	caughtUp
	holding
	released
	timedOut
)

type entry struct {
	label, host string
	at          time.Time
	late        bool
	state       entryState
	heldSince   time.Time
}

// Barrier is the state machine of one partial barrier. It is not safe for
// concurrent use: one actor owns it.
type Barrier struct {
	o         Options
	throttle  Throttle
	sem       Semaphore
	throttled bool
	semaphore bool
	needPct   int // labels for MinPercent (0: off)
	batch     int // labels per throttled batch
	limitCap  int
	now       time.Time
	closed    bool
	started   bool
	first     time.Time
	fired     bool
	reason    FireReason
	firedAt   time.Time
	entries   map[string]*entry
	queue     []*entry // FIFO: waiting for FIRE, a throttled batch, or a semaphore slot
	passed    []Passage
	nextBatch time.Time
	holders   []*entry // admission order
	limit     int
	adaptive  *Adaptive
	knee      *Knee
	kneeOK    bool // an acceptable knee has been seen
	lastAsk   time.Time
	pctAsked  bool
	vetoes    int
}

// New returns a barrier, or an error from Options.Validate.
func New(o Options) (*Barrier, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	b := &Barrier{o: o, entries: make(map[string]*entry)}
	if o.Throttle != nil {
		b.throttle, b.throttled = *o.Throttle, true
		b.o.Throttle = &b.throttle
		b.batch = b.throttle.Count
		if b.batch == 0 {
			b.batch = percentCount(b.throttle.Percent, o.MaxParticipants)
		}
	}
	if o.Semaphore != nil {
		b.sem, b.semaphore = *o.Semaphore, true
		b.o.Semaphore = &b.sem
		b.limit = b.sem.Count
		b.limitCap = o.MaxParticipants
		if b.sem.AdaptiveMax > 0 {
			b.limitCap = b.sem.AdaptiveMax
		}
		if b.sem.Adaptive {
			b.adaptive = &Adaptive{}
		}
	}
	b.needPct = percentCount(o.MinPercent, o.MaxParticipants)
	if o.FireOnKnee || o.EntryCallback {
		k, err := NewKnee(KneeConfig{Expected: o.MaxParticipants, MinPercent: o.MinPercent, MinWait: o.MinWait, Warmup: o.KneeWarmup})
		if err != nil {
			return nil, err
		}
		b.knee = k
	}
	return b, nil
}

// enter records that label (on host) reached the barrier at now.
func (b *Barrier) enter(now time.Time, label, host string) (Decision, error) {
	switch {
	case b.closed:
		return Decision{}, ErrClosed
	case label == "":
		return Decision{}, ErrEmptyLabel
	case b.entries[label] != nil:
		return Decision{}, fmt.Errorf("%w: %q", ErrDuplicateLabel, label)
	case len(b.entries) >= b.o.MaxParticipants:
		return Decision{}, fmt.Errorf("%w: %q (max %d)", ErrFull, label, b.o.MaxParticipants)
	}
	now = b.clamp(now)
	var d Decision
	b.advance(now, &d)
	e := &entry{label: label, host: host, at: now}
	b.entries[label] = e
	if !b.started {
		b.started, b.first = true, now
	}
	switch {
	case b.semaphore:
		b.queue = append(b.queue, e)
		b.fill(now, &d)
	case !b.fired:
		b.queue = append(b.queue, e)
		if b.knee != nil {
			// Knees due by now were already found by advance at this now.
			b.knee.Arrive(now)
		}
		if len(b.entries) >= b.o.MaxParticipants {
			b.fire(now, FireMax, &d)
		} else if !b.o.EntryCallback {
			if b.percentMet(now) {
				b.fire(now, FirePercent, &d)
			}
		} else {
			c := b.consultation(now, nil)
			c.Label, c.Host = label, host
			d.Consult = c
		}
	default:
		e.late = true
		switch {
		case b.o.LateMode == CatchUp:
			e.state = caughtUp
			d.CatchUp = append(d.CatchUp, label)
		case b.throttled:
			b.queue = append(b.queue, e)
			b.releaseDue(now, &d)
		default:
			b.pass(e, now, &d)
		}
	}
	return d, nil
}

// tick tells the barrier that time now has come.
func (b *Barrier) tick(now time.Time) Decision {
	if b.closed {
		return Decision{}
	}
	now = b.clamp(now)
	var d Decision
	b.advance(now, &d)
	return d
}

// release tells a semaphore barrier that label left the critical section.
func (b *Barrier) release(now time.Time, label string) (Decision, error) {
	if b.closed {
		return Decision{}, ErrClosed
	}
	if !b.semaphore {
		return Decision{}, ErrNotSemaphore
	}
	e := b.entries[label]
	if e == nil {
		return Decision{}, fmt.Errorf("%w: %q", ErrUnknownLabel, label)
	}
	if e.state != holding {
		return Decision{}, fmt.Errorf("%w: %q", ErrNotHolding, label)
	}
	now = b.clamp(now)
	for i, h := range b.holders {
		if h == e {
			b.holders = append(b.holders[:i], b.holders[i+1:]...)
			break
		}
	}
	e.state = released
	if b.adaptive != nil {
		level := b.limit
		b.adaptive.Observe(now.Sub(e.heldSince))
		b.limit = min(max(level-1+b.adaptive.Decide(level), 1), b.limitCap)
	}
	var d Decision
	b.advance(now, &d)
	return d, nil
}

// forceFire fires the barrier now.
func (b *Barrier) forceFire(now time.Time) (Decision, error) {
	switch {
	case b.closed:
		return Decision{}, ErrClosed
	case b.semaphore:
		return Decision{}, ErrSemaphore
	case b.fired:
		return Decision{}, ErrAlreadyFired
	}
	now = b.clamp(now)
	var d Decision
	b.advance(now, &d)
	if !b.fired {
		b.fire(now, FireForced, &d)
	}
	return d, nil
}

// veto records that the shell's entry callback answered false.
func (b *Barrier) veto(now time.Time) (Decision, error) {
	switch {
	case b.closed:
		return Decision{}, ErrClosed
	case !b.o.EntryCallback:
		return Decision{}, ErrNoCallback
	}
	now = b.clamp(now)
	var d Decision
	b.advance(now, &d)
	b.vetoes++
	if !b.fired {
		b.lastAsk = now
	}
	return d, nil
}

// Close closes the barrier: later events fail with ErrClosed and a Tick
// does nothing. It returns the labels still waiting, in FIFO order.
func (b *Barrier) Close() (waiting []string) {
	if b.closed {
		return nil
	}
	b.closed = true
	for _, e := range b.queue {
		waiting = append(waiting, e.label)
	}
	b.queue = nil
	return waiting
}

// NextDeadline is the earliest instant at which a Tick would change something
// (zero: none).
func (b *Barrier) NextDeadline() time.Time {
	var t time.Time
	consider := func(x time.Time) {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	switch {
	case b.closed:
	case b.semaphore:
		if b.sem.HolderTimeout > 0 {
			for _, h := range b.holders {
				consider(h.heldSince.Add(b.sem.HolderTimeout))
			}
		}
	case !b.fired:
		if !b.started {
			break
		}
		if b.o.Timeout > 0 {
			consider(b.first.Add(b.o.Timeout))
		}
		if b.percentGate() && len(b.entries) >= b.needPct && !(b.o.EntryCallback && b.pctAsked) {
			consider(b.first.Add(b.o.MinWait))
		}
		if b.knee != nil {
			consider(b.knee.NextDeadline())
		}
		if b.o.EntryCallback && b.o.CallbackTimeout > 0 {
			consider(b.lastAsk.Add(b.o.CallbackTimeout))
		}
	case b.throttled && len(b.queue) > 0:
		consider(b.nextBatch)
	}
	return t
}

// advance applies everything due by now.
func (b *Barrier) advance(now time.Time, d *Decision) {
	if b.semaphore {
		if b.sem.HolderTimeout > 0 {
			kept := b.holders[:0]
			for _, h := range b.holders {
				if now.Before(h.heldSince.Add(b.sem.HolderTimeout)) {
					kept = append(kept, h)
					continue
				}
				h.state = timedOut
				d.TimedOut = append(d.TimedOut, h.label)
			}
			clear(b.holders[len(kept):])
			b.holders = kept
		}
		b.fill(now, d)
		return
	}
	if !b.fired && b.started {
		b.advanceUnfired(now, d)
	}
	if b.fired && b.throttled {
		b.releaseDue(now, d)
	}
}

func (b *Barrier) advanceUnfired(now time.Time, d *Decision) {
	var kneeAt time.Time
	var knee *KneePoint
	if b.knee != nil {
		before := len(b.knee.knees)
		if b.knee.Check(now) {
			b.kneeOK = true
			p := b.knee.knees[b.knee.pending]
			knee, kneeAt = &p, p.AcceptedAt
		}
		d.Knees = append(d.Knees, b.knee.knees[before:]...)
		if knee != nil && b.knee.pending < before {
			d.Knees = append(d.Knees, *knee) // promoted by MinWait
		}
	}
	// Candidates due by now; the earliest wins, ties in the order timeout,
	// percent, knee.
	reason, at := NotFired, time.Time{}
	pick := func(r FireReason, t time.Time) {
		if reason == NotFired || t.Before(at) {
			reason, at = r, t
		}
	}
	if b.o.Timeout > 0 && !now.Before(b.first.Add(b.o.Timeout)) {
		pick(FireTimeout, b.first.Add(b.o.Timeout))
	}
	pct := b.percentMet(now)
	if !b.o.EntryCallback {
		if pct {
			pick(FirePercent, b.first.Add(b.o.MinWait))
		}
		if knee != nil && b.o.FireOnKnee {
			pick(FireKnee, kneeAt)
		}
		if reason != NotFired {
			b.fire(now, reason, d)
		}
		return
	}
	if reason == FireTimeout {
		b.fire(now, reason, d)
		return
	}
	ask := knee != nil
	if pct && !b.pctAsked {
		ask = true
	}
	if b.o.CallbackTimeout > 0 && !now.Before(b.lastAsk.Add(b.o.CallbackTimeout)) {
		ask = true
	}
	if ask {
		d.Consult = b.consultation(now, knee)
	}
}

// consultation builds a Consultation with the default answer at now and
// restarts the CallbackTimeout clock.
func (b *Barrier) consultation(now time.Time, knee *KneePoint) *Consultation {
	c := &Consultation{Knee: knee}
	switch {
	case b.percentMet(now):
		c.Default, c.Reason = true, FirePercent
		b.pctAsked = true
	case b.o.FireOnKnee && b.kneeOK:
		c.Default, c.Reason = true, FireKnee
	}
	b.lastAsk = now
	return c
}

// percentGate tells whether MinPercent fires the barrier (rather than
// gating knees).
func (b *Barrier) percentGate() bool { return b.needPct > 0 && !b.o.FireOnKnee }

func (b *Barrier) percentMet(now time.Time) bool {
	return b.percentGate() && len(b.entries) >= b.needPct && !now.Before(b.first.Add(b.o.MinWait))
}

func (b *Barrier) fire(now time.Time, r FireReason, d *Decision) {
	b.fired, b.reason, b.firedAt = true, r, now
	d.Fired, d.Reason = true, r
	if b.throttled {
		b.nextBatch = now
		b.releaseDue(now, d)
		return
	}
	for _, e := range b.queue {
		b.pass(e, now, d)
	}
	b.queue = nil
}

// releaseDue releases one throttled batch if one is due.
func (b *Barrier) releaseDue(now time.Time, d *Decision) {
	if len(b.queue) == 0 || now.Before(b.nextBatch) {
		return
	}
	n := min(b.batch, len(b.queue))
	for _, e := range b.queue[:n] {
		b.pass(e, now, d)
	}
	clear(b.queue[:n])
	b.queue = b.queue[n:]
	b.nextBatch = now.Add(b.throttle.Interval)
}

// fill admits waiting labels into a semaphore's critical section.
func (b *Barrier) fill(now time.Time, d *Decision) {
	for len(b.holders) < b.limit && len(b.queue) > 0 {
		e := b.queue[0]
		b.queue[0] = nil
		b.queue = b.queue[1:]
		b.holders = append(b.holders, e)
		b.pass(e, now, d)
		e.state, e.heldSince = holding, now
	}
}

func (b *Barrier) pass(e *entry, now time.Time, d *Decision) {
	e.state = passed
	b.passed = append(b.passed, Passage{Label: e.label, Host: e.host, At: now, Late: e.late})
	if e.late {
		d.LateFire = append(d.LateFire, e.label)
	} else {
		d.Release = append(d.Release, e.label)
	}
}

func (b *Barrier) clamp(now time.Time) time.Time {
	if now.Before(b.now) {
		return b.now
	}
	b.now = now
	return now
}

// Fired reports whether the barrier fired, and why.
func (b *Barrier) Fired() (bool, FireReason) { return b.fired, b.reason }

// FiredAt is the time of the event that fired the barrier (zero if not).
func (b *Barrier) FiredAt() time.Time { return b.firedAt }

// Closed reports whether Close was called.
func (b *Barrier) Closed() bool { return b.closed }

// Entered is the number of distinct labels that entered.
func (b *Barrier) Entered() int { return len(b.entries) }

// Waiting lists the labels waiting to be released, in FIFO order.
func (b *Barrier) Waiting() []string {
	out := make([]string, 0, len(b.queue))
	for _, e := range b.queue {
		out = append(out, e.label)
	}
	return out
}

// Holders lists a semaphore's current holders, in admission order.
func (b *Barrier) Holders() []string {
	out := make([]string, 0, len(b.holders))
	for _, e := range b.holders {
		out = append(out, e.label)
	}
	return out
}

// Limit is a semaphore's current concurrency level (0 otherwise).
func (b *Barrier) Limit() int { return b.limit }

// Passed lists every label that passed, in the order it passed.
func (b *Barrier) Passed() []Passage { return append([]Passage(nil), b.passed...) }

// Hosts maps each label that passed to its host (the paper's getHosts).
func (b *Barrier) Hosts() map[string]string {
	m := make(map[string]string, len(b.passed))
	for _, p := range b.passed {
		m[p.Label] = p.Host
	}
	return m
}

// Knees lists the knees found so far (nil without knee detection).
func (b *Barrier) Knees() []KneePoint {
	if b.knee == nil {
		return nil
	}
	return b.knee.Knees()
}

// Vetoes is the number of Veto answers received.
func (b *Barrier) Vetoes() int { return b.vetoes }

// Counts are the barrier's numbers as they stand, without copying its
// lists: distinct labels entered, labels passed, labels queued (waiting
// for the fire, a throttled batch or a semaphore slot), and a
// semaphore's holders.
func (b *Barrier) Counts() (entered, passed, queued, holders int) {
	return len(b.entries), len(b.passed), len(b.queue), len(b.holders)
}
