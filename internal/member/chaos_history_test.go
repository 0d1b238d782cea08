package member

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/history"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// A chaos seed records its calls and faults as a history
// (internal/history) and checks it against the fault model once every
// step returned: the oracle is the model, not excuses written into each
// step.

// chaosOp is one call of the workload as recorded: its history op, and
// what it needs on an idle machine (base) and in round trips between
// members (trips), from which its measured need follows once the probe
// has measured the round trips of the time it ran.
type chaosOp struct {
	op    history.Op
	step  chaosStep
	base  time.Duration
	trips int
	err   error // the answer's error, as a violation quotes it
}

// What each kind of call needs after its object is readable: a Put
// registers and copies (3 round trips), a Get locates, fetches and
// reports (4), a Delete reaches the shard and every holder (3), a Reduce
// chaosReduceTrips after its last source.
const (
	chaosPutBase    = 300 * time.Millisecond
	chaosPutTrips   = 3
	chaosGetBase    = 500 * time.Millisecond
	chaosGetTrips   = 4
	chaosDeleteBase = 300 * time.Millisecond
)

// chaosSettle is how long after a fault it still explains a slow or
// failed call: the failure's detection and notice, a shard's move and
// its rebuild from the store nodes' republication.
const chaosSettle = 2 * time.Second

// newOp starts the record of a call on member of object id (a Reduce's
// target).
func (c *chaosRun) newOp(kind history.OpKind, s chaosStep, member int, id string, size int) *chaosOp {
	rec := &chaosOp{step: s, op: history.Op{Kind: kind, Member: member, Object: id, Size: int64(size),
		Shard: directory.ShardIndex(id, c.l.cfg.Shards), Label: c.p.describe(s)}}
	rec.op.Hosts[0] = c.shardHost(id)
	switch kind {
	case history.Put:
		rec.base, rec.trips = chaosPutBase, chaosPutTrips
	case history.Get:
		rec.base, rec.trips = chaosGetBase, chaosGetTrips
	case history.Delete:
		rec.base, rec.trips = chaosDeleteBase, chaosPutTrips
	case history.Reduce:
		rec.base, rec.trips = chaosReduceSlack, chaosReduceTrips
	}
	return rec
}

// record ends a call's record: when it ran, its answer.
func (c *chaosRun) record(rec *chaosOp, begin, end, deadline, canceled time.Time, err error) {
	rec.op.Begin, rec.op.End, rec.op.Deadline, rec.op.Canceled = begin, end, deadline, canceled
	rec.op.Hosts[1] = c.shardHost(rec.op.Object)
	rec.err = err
	var me *messages.Error
	switch {
	case err == nil:
		rec.op.Code = messages.ErrorCode_OK
	case errors.As(err, &me):
		rec.op.Code = me.GetCode()
		rec.op.Abandoned = rec.op.Kind == history.Reduce && reduction.AbandonedAtCancel(err)
	default:
		rec.op.Code = messages.ErrorCode_INTERNAL
	}
	c.mu.Lock()
	rec.op.ID = len(c.ops)
	c.ops = append(c.ops, rec)
	c.mu.Unlock()
}

// event records a fault as it ran.
func (c *chaosRun) event(e history.Event) {
	c.mu.Lock()
	c.events = append(c.events, e)
	c.mu.Unlock()
}

// incarnation records which node index a member id names, for the
// evictions the shards hear of (see evictHook).
func (c *chaosRun) incarnation(i int) {
	if m := c.l.Member(i); m != nil {
		c.mu.Lock()
		c.ids[m.ID()] = i
		c.mu.Unlock()
		// Every eviction as the store makes it: the unpublication the
		// store node sends can die with the object's shard's host, or
		// reach a shard that does not list the copy yet, and a copy gone
		// unheard made a true LOST look false.
		c.l.Store(i).OnEvict(func(id string) {
			now := time.Now()
			c.evictMu.Lock()
			c.evicted = append(c.evicted, history.Event{Kind: history.Evict, Member: i, Shard: -1, Object: id, Begin: now, End: now})
			c.evictMu.Unlock()
		})
	}
}

// evictHook is the shards' hook: besides the injected crashes, a member
// that unpublishes a copy (an eviction under capacity pressure, or a
// fetch it gave up) is recorded as having dropped it.
func (c *chaosRun) evictHook(shard string, msg any) {
	if u, ok := msg.(*messages.UnpublishLocation); ok {
		c.mu.Lock()
		c.unpublished = append(c.unpublished, chaosUnpublished{id: u.GetObjectId(), node: u.GetNode().GetNodeId(), at: time.Now()})
		c.mu.Unlock()
	}
	chaosCrashHook(shard, msg)
}

// chaosUnpublished is an UnpublishLocation a shard received.
type chaosUnpublished struct {
	id, node string
	at       time.Time
}

// history is what the seed recorded, each call's need measured by the
// probe while it ran. Callers hold c.mu.
func (c *chaosRun) history() history.History {
	var h history.History
	for _, rec := range c.ops {
		o := rec.op
		o.Need = chaosSlow(rec.base) + time.Duration(rec.trips)*c.rtt(o.Begin, o.End)
		h.Ops = append(h.Ops, o)
	}
	h.Events = slices.Clone(c.events)
	c.evictMu.Lock()
	h.Events = append(h.Events, c.evicted...)
	c.evictMu.Unlock()
	for _, u := range c.unpublished {
		if i, ok := c.ids[u.node]; ok {
			h.Events = append(h.Events, history.Event{Kind: history.Evict, Member: i, Object: u.id, Begin: u.at, End: u.at})
		}
	}
	return h
}

// chaosModel is the fault model as the seed's cluster runs it.
func (c *chaosRun) model() history.Model {
	memo := map[string]uint64{}
	return history.Model{Grace: chaosGrace, Settle: chaosSlow(chaosSettle), Capacity: c.p.capacity, Paused: chaosPauses().Within,
		Reduction: func(target string, ids []string) uint64 {
			key := target + "=" + strings.Join(slices.Sorted(slices.Values(ids)), "+")
			if f, ok := memo[key]; ok {
				return f
			}
			f := uint64(0)
			for _, r := range c.p.reduces {
				if r.target == target {
					f = fingerprint.Of(chaosReduceBytes(r.op, c.reducedInputs(r, ids)))
				}
			}
			memo[key] = f
			return f
		}}
}

// checkHistory checks the recorded history against the model and says
// each violation with the call's step.
func (c *chaosRun) checkHistory() {
	c.mu.Lock()
	h, m := c.history(), c.model()
	c.mu.Unlock()
	rep := history.Check(h, m)
	for _, v := range rep.Violations {
		c.violations = append(c.violations, v.Rule)
		c.errorf("%s (%s)\n  error: %v\n  faults: %s\n  %s\n  now: %s", v, c.opTimes(h, v.Op), c.ops[v.Op].err, chaosEvents(h), c.lostCopies[v.Op], c.whereNow(h.Ops[v.Op]))
	}
	if chaosVerbose {
		for id, why := range rep.Excuses {
			c.t.Logf("seed %d: %s: %v explained: %s", c.p.seed, h.Ops[id].Label, h.Ops[id].Code, why)
		}
	}
	c.stats.excused(h, rep)
}

// opTimes says when op id ran, relative to the schedule's start.
func (c *chaosRun) opTimes(h history.History, id int) string {
	o := h.Ops[id]
	return fmt.Sprintf("member %d, +%v to +%v (%s to %s), deadline +%v, need %v, answer %v", o.Member, o.Begin.Sub(c.t0).Round(time.Millisecond),
		o.End.Sub(c.t0).Round(time.Millisecond), o.Begin.Format("15:04:05.000"), o.End.Format("15:04:05.000"),
		o.Deadline.Sub(c.t0).Round(time.Millisecond), o.Need.Round(time.Millisecond), o.Code)
}

// chaosEvents lists the faults, for a violation's context.
func chaosEvents(h history.History) string {
	var out []string
	for _, e := range h.Events {
		if e.Kind != history.Evict {
			out = append(out, e.String())
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// whereNow describes, once the seed is over, where the object of a call
// that broke a rule is and what fills the caller's store.
func (c *chaosRun) whereNow(o history.Op) string {
	var out []string
	for _, obj := range c.p.objs {
		if obj.id == o.Object && c.l.Alive(obj.node) {
			out = append(out, c.whereIs(obj))
		}
	}
	if o.Member >= 0 && o.Member < c.p.nodes && c.l.Alive(o.Member) {
		st := c.l.Store(o.Member)
		u := st.Usage()
		var objs []string
		for _, x := range st.Objects() {
			size, written, done, pinned, err := x.State()
			objs = append(objs, fmt.Sprintf("%s %d/%d done %v pinned %v err %v", x.ID(), written, size, done, pinned, err))
		}
		out = append(out, fmt.Sprintf("member %d's store: %d of %d bytes used (%d pinned, %d cached, %d evictions): %s",
			o.Member, u.Used, u.Capacity, u.Pinned, u.Cached, u.Evictions, strings.Join(objs, "; ")))
	}
	return strings.Join(out, "\n  ")
}
