package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Model is what the checker needs to know of the system beyond the
// history.
type Model struct {
	// Grace is how long past its deadline, or past its cancellation, an
	// answer may come.
	Grace time.Duration
	// Settle is how long after a fault ended it still explains a slow or
	// failed call: the failure's detection, the notice's spread and the
	// shards' rebuild.
	Settle time.Duration
	// Capacity is each member's store size in bytes (0: unbounded).
	Capacity int64
	// Reduction is the fingerprint of the Reduce into target of exactly
	// the source ids given (in any order).
	Reduction func(target string, ids []string) uint64
	// Paused is how long the process that recorded the history did not
	// run between from and to (nil: it always ran). An answer later than
	// its due plus Grace is excused as far as the recorder did not run
	// past its due: a machine that stops every process delays the reading
	// of an answer as much as the answer.
	Paused func(from, to time.Time) time.Duration
}

// Rule names a promise of the fault model.
type Rule string

// The rules Check enforces, one per promise.
const (
	RuleLate        Rule = "answered past its deadline (or its cancel) plus the grace"
	RuleCode        Rule = "an answer no workload explains"
	RuleBytes       Rule = "exact bytes"
	RuleAfterDelete Rule = "nothing read after a Delete completed"
	RuleLost        Rule = "LOST only when every copy is gone"
	RuleNotFound    Rule = "NOT_FOUND only for an id never Put or being deleted"
	RuleDeleted     Rule = "DELETED only for an id being deleted"
	RuleTimeout     Rule = "TIMEOUT or UNAVAILABLE only where the schedule explains it"
	RuleCanceled    Rule = "CANCELED only for a canceled call"
	RuleCapacity    Rule = "CAPACITY only when the member is full"
	RuleReset       Rule = "RESET only for a Reduce's target being produced"
	RuleReduced     Rule = "a Reduce reduces num distinct sources, fewer only for lost ones"
	RuleReduction   Rule = "a Reduce's target is the reduction of the sources it names"
)

// Violation is an answer the model does not allow.
type Violation struct {
	Op     int // the op's ID
	Label  string
	Rule   Rule
	Detail string
}

// String says which call broke which rule, and how.
func (v Violation) String() string {
	return fmt.Sprintf("%s: %s: %s", v.Label, v.Rule, v.Detail)
}

// Report is what Check found: the violations, and for each failed call
// that the model allows, what explained it (by op ID).
type Report struct {
	Violations []Violation
	Excuses    map[int]string
	// Paused says, by op ID, for each answer later than its due plus the
	// grace, how long of it the recorder did not run (Model.Paused).
	Paused map[int]string
}

// Check checks every op of h against the model.
func Check(h History, m Model) Report {
	c := &checker{x: newIndex(h), m: m, rep: Report{Excuses: map[int]string{}, Paused: map[int]string{}}}
	for i := range h.Ops {
		c.op(&h.Ops[i])
	}
	return c.rep
}

type checker struct {
	x   *index
	m   Model
	rep Report
}

func (c *checker) fail(o *Op, r Rule, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, Violation{Op: o.ID, Label: label(o), Rule: r, Detail: fmt.Sprintf(format, args...)})
}

// excuse records why a failed op is allowed, or fails it under r.
func (c *checker) excuse(o *Op, r Rule, why string, unexplained string) {
	if why != "" {
		c.rep.Excuses[o.ID] = why
		return
	}
	c.fail(o, r, "%s", unexplained)
}

// late fails o if it answered later than due plus the grace, less what
// of that time the recorder did not run.
func (c *checker) late(o *Op, due time.Time, what string) {
	if due.IsZero() || !o.End.After(due.Add(c.m.Grace)) {
		return
	}
	late, paused := o.End.Sub(due), time.Duration(0)
	if c.m.Paused != nil {
		paused = c.m.Paused(due, o.End)
	}
	if late-paused > c.m.Grace {
		c.fail(o, RuleLate, "answered %v %s (the recorder did not run for %v of it)", late.Round(time.Millisecond), what, paused.Round(time.Millisecond))
		return
	}
	c.rep.Paused[o.ID] = fmt.Sprintf("answered %v %s, %v of it while the recorder did not run", late.Round(time.Millisecond), what, paused.Round(time.Millisecond))
}

func (c *checker) op(o *Op) {
	c.late(o, o.Deadline, "past its deadline")
	c.late(o, o.Canceled, "after its cancel")
	code := o.Code
	switch code {
	case messages.ErrorCode_OK:
		c.okOp(o)
		return
	case messages.ErrorCode_CANCELED:
		if o.Canceled.IsZero() || o.Canceled.After(o.End) {
			c.fail(o, RuleCanceled, "the caller did not cancel it")
		} else {
			c.rep.Excuses[o.ID] = "canceled"
		}
		return
	case messages.ErrorCode_LOST:
		c.lostOp(o)
		return
	case messages.ErrorCode_NOT_FOUND:
		c.notFound(o)
		return
	case messages.ErrorCode_DELETED:
		c.deleted(o)
		return
	case messages.ErrorCode_TIMEOUT, messages.ErrorCode_UNAVAILABLE:
		c.slow(o)
		return
	case messages.ErrorCode_CAPACITY:
		c.capacity(o)
		return
	case messages.ErrorCode_RESET:
		if r := c.x.reduces[o.Object]; o.Kind == Get && r != nil && o.Begin.Before(r.End) {
			c.rep.Excuses[o.ID] = "read its target while " + label(r) + " ran"
			return
		}
		c.fail(o, RuleReset, "no Reduce was producing %s", o.Object)
		return
	}
	c.fail(o, RuleCode, "%v", code)
}

// okOp: exact bytes, nothing read after a Delete, a Reduce's answer.
func (c *checker) okOp(o *Op) {
	switch o.Kind {
	case Get:
		if d := c.x.deleteDone(o.Object, o.Begin); d != nil {
			c.fail(o, RuleAfterDelete, "read %s, which %s deleted before it began", o.Object, label(d))
		}
		if r := c.x.reduces[o.Object]; r != nil {
			c.targetRead(o, r)
			return
		}
		var sums []uint64
		for _, p := range c.x.byObject[o.Object] {
			if p.Kind == Put && p.Begin.Before(o.End) {
				sums = append(sums, p.Sum)
			}
		}
		if len(sums) == 0 {
			c.fail(o, RuleBytes, "read %s, which no Put had begun to create", o.Object)
		} else if !slices.Contains(sums, o.Sum) {
			c.fail(o, RuleBytes, "read %s of fingerprint %016x; it was Put as %016x", o.Object, o.Sum, sums)
		}
	case Reduce:
		c.reduceAnswer(o)
	}
}

// targetRead: a read of a Reduce's target is the reduction of the
// sources the Reduce named, or, while its answer is unknown, of some
// num of its sources (fewer only for an AllReduce that lost some).
func (c *checker) targetRead(g, r *Op) {
	if c.m.Reduction == nil {
		return
	}
	if ok(r) {
		if g.Sum == c.m.Reduction(r.Object, r.Reduced) {
			return
		}
		// A commit nobody remembers: the reader's member and the
		// coordinator's both died while the Reduce ran, with every copy
		// of the first attempt's result, and the next attempt reduced
		// again (docs/fault-model.md says so of n-of-m Reduces).
		if c.diedDuring(g.Member, r) && (c.diedDuring(r.Hosts[0], r) || c.diedDuring(r.Hosts[1], r)) && c.someReduction(r, g.Sum, r.Num) {
			c.rep.Excuses[g.ID] = "read a result whose commit died with the reader and the coordinator"
			return
		}
		c.fail(g, RuleReduction, "read %s of fingerprint %016x, not the reduction of the reduced %v", g.Object, g.Sum, r.Reduced)
		return
	}
	if r.Abandoned && g.Begin.After(r.End) {
		c.fail(g, RuleReduction, "read %s, the target of %s, which its coordinator abandoned at its caller's cancel before the read began", g.Object, label(r))
		return
	}
	least := r.Num
	if r.All {
		least = max(1, r.Num-len(c.lostSources(r, g.End)))
	}
	if !c.someReduction(r, g.Sum, least) {
		c.fail(g, RuleReduction, "read %s of fingerprint %016x, no reduction of %d to %d of its sources %v (%s answered %v)",
			g.Object, g.Sum, least, r.Num, r.Sources, label(r), r.Code)
	}
}

func (c *checker) diedDuring(member int, r *Op) bool {
	if member < 0 {
		return false
	}
	for _, e := range c.x.h.Events {
		if (e.Kind == Kill || e.Kind == Restart) && e.Member == member && !e.Begin.Before(r.Begin) && !e.Begin.After(r.End) {
			return true
		}
	}
	return false
}

// someReduction reports whether sum is the reduction of some k of r's
// sources, least <= k <= r.Num.
func (c *checker) someReduction(r *Op, sum uint64, least int) bool {
	for k := r.Num; k >= max(1, least); k-- {
		for _, set := range subsets(r.Sources, k) {
			if c.m.Reduction(r.Object, set) == sum {
				return true
			}
		}
	}
	return false
}

func subsets(of []string, k int) [][]string {
	var out [][]string
	var rec func(start int, cur []string)
	rec = func(start int, cur []string) {
		if len(cur) == k {
			out = append(out, slices.Clone(cur))
			return
		}
		for i := start; i < len(of); i++ {
			rec(i+1, append(cur, of[i]))
		}
	}
	rec(0, nil)
	return out
}

// lostSources are r's sources that cannot take part by t: never Put
// before it, being deleted, or with every copy gone.
func (c *checker) lostSources(r *Op, t time.Time) []string {
	var out []string
	for _, s := range r.Sources {
		if _, readable := c.x.readableFrom(s); !readable || c.x.gonePast(s, t, t) != "" {
			out = append(out, s)
		}
	}
	return out
}

// reduceAnswer: reduced and unreduced partition the sources, num of them
// reduced (an AllReduce fewer, only for sources lost by its answer), none
// deleted before it began.
func (c *checker) reduceAnswer(o *Op) {
	seen := map[string]bool{}
	for _, list := range [][]string{o.Reduced, o.Unreduced} {
		for _, id := range list {
			if seen[id] || !slices.Contains(o.Sources, id) {
				c.fail(o, RuleReduced, "reduced %v, unreduced %v: %q twice or not a source of %v", o.Reduced, o.Unreduced, id, o.Sources)
				return
			}
			seen[id] = true
		}
	}
	if len(seen) != len(o.Sources) {
		c.fail(o, RuleReduced, "reduced %v + unreduced %v do not cover the sources %v", o.Reduced, o.Unreduced, o.Sources)
		return
	}
	if len(o.Reduced) > o.Num || len(o.Reduced) == 0 {
		c.fail(o, RuleReduced, "reduced %d sources %v, want %d", len(o.Reduced), o.Reduced, o.Num)
		return
	}
	if short := o.Num - len(o.Reduced); short > 0 {
		var lost []string
		for _, s := range c.lostSources(o, o.End) {
			if slices.Contains(o.Unreduced, s) {
				lost = append(lost, s)
			}
		}
		if !o.All || len(lost) < short {
			c.fail(o, RuleReduced, "reduced %d sources %v, want %d; of the others only %v were lost", len(o.Reduced), o.Reduced, o.Num, lost)
			return
		}
		c.rep.Excuses[o.ID] = fmt.Sprintf("reduced %d of %d: %v lost", len(o.Reduced), o.Num, lost)
	}
	for _, s := range o.Reduced {
		if d := c.x.deleteDone(s, o.Begin); d != nil {
			c.fail(o, RuleAfterDelete, "reduced %s, which %s deleted before it began", s, label(d))
		}
	}
}

// provenanceLost explains a Reduce's LOST about its own result (see
// docs/fault-model.md, "What is retried for you"): an earlier attempt of
// the call made the target, readable, and the members that knew which
// sources it reduced died before the new attempt asked. So the target
// was read before the answer, and the coordinator's member (the target
// shard's host) was killed, restarted or paused, or the shard crashed,
// from Settle before the call began until it answered; "" if not.
func (c *checker) provenanceLost(o *Op) string {
	read, ok := c.x.readableFrom(o.Object)
	if !ok || read.After(o.End) {
		return ""
	}
	from := o.Begin.Add(-c.m.Settle)
	for _, e := range c.x.h.Events {
		if e.Begin.After(o.End) || (e.End.Before(from) && !e.End.IsZero()) {
			continue
		}
		host := (e.Kind == Kill || e.Kind == Restart || e.Kind == Pause) && (e.Member == o.Hosts[0] || e.Member == o.Hosts[1])
		if host || e.Kind == CrashShard && e.Shard == o.Shard {
			return fmt.Sprintf("its target was read (from %s), and %s took what its coordinator knew of the sources an earlier attempt reduced",
				read.Format("15:04:05.000"), e)
		}
	}
	return ""
}

// lostOp: LOST only once every copy known to exist is gone.
func (c *checker) lostOp(o *Op) {
	if o.Kind == Put {
		// A Put makes the copy LOST would say is gone: what it can answer
		// when its member fails is UNAVAILABLE.
		c.fail(o, RuleLost, "a Put of %s answered LOST", o.Object)
		return
	}
	ids := []string{o.Object}
	if o.Kind == Reduce {
		// Too few sources left, or (a retry's) result whose sources
		// were lost.
		if lost := c.lostSources(o, o.End); len(lost) > len(o.Sources)-o.Num {
			c.rep.Excuses[o.ID] = fmt.Sprintf("sources %v lost, %d of %d needed", lost, o.Num, len(o.Sources))
			return
		}
		if why := c.provenanceLost(o); why != "" {
			c.rep.Excuses[o.ID] = why
			return
		}
		ids = o.Sources
	}
	var alive []string
	for _, id := range ids {
		if d := c.x.deleteBegan(id, o.End); d != nil {
			c.rep.Excuses[o.ID] = fmt.Sprintf("%s began before it answered", label(d))
			return
		}
		if !c.x.putBegan(id, o.End) {
			continue
		}
		why, left := c.x.lost(id, o.Begin, o.End)
		if why != "" {
			c.rep.Excuses[o.ID] = why
			if o.Kind != Reduce {
				return
			}
			continue
		}
		alive = append(alive, fmt.Sprintf("%s on %s", id, strings.Join(left, ", ")))
	}
	if len(alive) == 0 && o.Kind == Reduce && c.rep.Excuses[o.ID] != "" {
		return
	}
	if len(alive) == 0 {
		c.fail(o, RuleLost, "no Put of %s began before it answered", o.Object)
		return
	}
	c.fail(o, RuleLost, "copies left: %s", strings.Join(alive, "; "))
}

// notFound: only an id that never existed before the call, or whose
// Delete began. A Delete's own start is no excuse for its NOT_FOUND: the
// directory answers a Delete of an id it knows, or knew and lost, or
// deleted already, with OK, so only another Delete, or an id that was
// not readable when the Delete began (its Put failed or still ran), is.
func (c *checker) notFound(o *Op) {
	ids := []string{o.Object}
	if o.Kind == Reduce {
		ids = o.Sources
	}
	for _, id := range ids {
		if d := c.x.otherDeleteBegan(id, o.End, o); d != nil {
			c.rep.Excuses[o.ID] = fmt.Sprintf("%s began before it answered", label(d))
			return
		}
	}
	if o.Kind == Reduce {
		c.fail(o, RuleNotFound, "none of its sources was being deleted (a Reduce waits for sources to appear)")
		return
	}
	if at, readable := c.x.readableFrom(o.Object); readable && at.Before(o.Begin) {
		c.fail(o, RuleNotFound, "%s was readable from %s, before it began, and no Delete began", o.Object, at.Format("15:04:05.000"))
		return
	}
	c.rep.Excuses[o.ID] = "not yet readable when it began"
}

func (c *checker) deleted(o *Op) {
	ids := []string{o.Object}
	if o.Kind == Reduce {
		ids = append(ids, o.Sources...)
	}
	for _, id := range ids {
		if d := c.x.otherDeleteBegan(id, o.End, o); d != nil {
			c.rep.Excuses[o.ID] = fmt.Sprintf("%s began before it answered", label(d))
			return
		}
	}
	c.fail(o, RuleDeleted, "no Delete of %s began before it answered", strings.Join(ids, ", "))
}
