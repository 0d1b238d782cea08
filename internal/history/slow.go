package history

import (
	"fmt"
	"slices"
	"time"
)

// slow: a TIMEOUT or UNAVAILABLE needs an explanation from the schedule:
// a fault that touched the call (a kill, restart, pause or crash of a
// member it needed, a crash of its shard, a stall of its data) from
// Settle before it began until it answered; an object not readable, lost
// or deleted in time; or a deadline below what the call measurably needs.
func (c *checker) slow(o *Op) {
	if !o.Canceled.IsZero() && !o.Canceled.After(o.End) {
		c.rep.Excuses[o.ID] = "canceled"
		return
	}
	if o.Deadline.Before(o.Begin.Add(o.Need)) {
		c.rep.Excuses[o.ID] = fmt.Sprintf("its deadline %v is below the %v it needs", o.Deadline.Sub(o.Begin).Round(time.Millisecond), o.Need.Round(time.Millisecond))
		return
	}
	switch o.Kind {
	case Get:
		c.excuse(o, RuleTimeout, c.getExcuse(o), c.unexplained(o))
	case Put:
		c.excuse(o, RuleTimeout, c.touched(o, c.members(o, false), []string{o.Object}), c.unexplained(o))
	case Delete:
		c.excuse(o, RuleTimeout, c.touched(o, c.members(o, true), []string{o.Object}), c.unexplained(o))
	case Reduce:
		c.excuse(o, RuleTimeout, c.reduceExcuse(o), c.unexplained(o))
	}
}

func (c *checker) unexplained(o *Op) string {
	return fmt.Sprintf("%v after %v (deadline %v, needs %v); no fault touched it and its data stayed readable",
		o.Code, o.End.Sub(o.Begin).Round(time.Millisecond), o.Deadline.Sub(o.Begin).Round(time.Millisecond), o.Need.Round(time.Millisecond))
}

// members are the members a call on o.Object needs: its caller, the
// shard's hosts and, with copies, every member known to hold or fetch
// one (a relay of a broadcast), and for a Reduce's target the Reduce's
// own members.
func (c *checker) members(o *Op, copies bool) []int {
	ms := []int{o.Member, o.Hosts[0], o.Hosts[1]}
	if !copies {
		return ms
	}
	for _, hd := range c.x.holders(o.Object) {
		ms = append(ms, hd.member)
	}
	for _, q := range c.x.byObject[o.Object] {
		if q.Kind == Get && q.Begin.Before(o.End) && q.End.After(o.Begin) {
			ms = append(ms, q.Member)
		}
	}
	if r := c.x.reduces[o.Object]; r != nil {
		ms = append(ms, c.reduceMembers(r)...)
	}
	return ms
}

// reduceMembers are a Reduce's caller, its coordinator's hosts and its
// sources' holders (the tree's positions).
func (c *checker) reduceMembers(r *Op) []int {
	ms := []int{r.Member, r.Hosts[0], r.Hosts[1]}
	for _, s := range r.Sources {
		for _, hd := range c.x.holders(s) {
			ms = append(ms, hd.member)
		}
	}
	return ms
}

// touched names a fault that touched o: of one of members (kill,
// restart, pause, store crash), of its shard, or a stall of one of objs
// or of the caller's fetches, from Settle before it began until it
// answered; "" if none.
func (c *checker) touched(o *Op, members []int, objs []string) string {
	from := o.Begin.Add(-c.m.Settle)
	for _, e := range c.x.h.Events {
		end := e.End
		if end.IsZero() || end.Before(e.Begin) {
			end = e.Begin
		}
		if e.Begin.After(o.End) || end.Before(from) {
			continue
		}
		switch e.Kind {
		case Kill, Restart, Pause, CrashStore:
			if slices.Contains(members, e.Member) {
				return e.String() + " touched it"
			}
		case CrashShard:
			if e.Shard == o.Shard {
				return e.String() + " (its shard)"
			}
		case Stall:
			if slices.Contains(objs, e.Object) || e.Member == o.Member {
				return e.String() + " held its data"
			}
		}
	}
	return ""
}

func (c *checker) getExcuse(o *Op) string {
	at, readable := c.x.readableFrom(o.Object)
	switch {
	case !readable:
		return o.Object + " never became readable"
	case at.Add(o.Need).After(o.Deadline):
		return fmt.Sprintf("%s became readable %v before its deadline, it needs %v", o.Object, o.Deadline.Sub(at).Round(time.Millisecond), o.Need.Round(time.Millisecond))
	}
	if why := c.x.gonePast(o.Object, o.End, o.End); why != "" {
		return why
	}
	objs := []string{o.Object}
	if r := c.x.reduces[o.Object]; r != nil {
		objs = append(objs, r.Sources...)
	}
	return c.touched(o, c.members(o, true), objs)
}

// reduceExcuse: fewer than num sources available (Put by Need before its
// deadline and their copies left), its caller's member touched, a stall
// of its data, or a fault at a member it runs on that left it too little
// time to start that part again. Those members are its coordinator's
// (the target shard's host, whose shard may crash instead) and its
// tree's: the reduce tree's positions are placed at copies of the
// sources, so its members are the sources' holders. The coordinator's
// Reduce starts again at the shard's home and a tree's position is
// placed again at another copy; either is owed the failure's detection
// (Settle) and its need again from the fault's end, so a fault that
// leaves that much before the deadline excuses nothing. A fault at any
// other member, or before Settle ahead of the call, excuses nothing.
func (c *checker) reduceExcuse(o *Op) string {
	if avail := c.availableSources(o); len(avail) < o.Num {
		return fmt.Sprintf("only %d of its sources %v stayed available in time, it needs %d", len(avail), avail, o.Num)
	}
	objs := append([]string{o.Object}, o.Sources...)
	var tree []int
	for _, s := range o.Sources {
		for _, hd := range c.x.holders(s) {
			if hd.from.Before(o.End) {
				tree = append(tree, hd.member)
			}
		}
	}
	from := o.Begin.Add(-c.m.Settle)
	for _, e := range c.x.h.Events {
		end := e.End
		if end.IsZero() || end.Before(e.Begin) {
			end = e.Begin
		}
		if e.Begin.After(o.End) || end.Before(from) {
			continue
		}
		if e.Kind == Stall && slices.Contains(objs, e.Object) {
			return e.String() + " held its data"
		}
		var role string
		switch {
		case (e.Kind == Kill || e.Kind == Restart || e.Kind == Pause) && (e.Member == o.Hosts[0] || e.Member == o.Hosts[1]):
			role = "its coordinator's member"
		case e.Kind == CrashShard && e.Shard == o.Shard:
			role = "its coordinator's shard"
		case (e.Kind == Kill || e.Kind == Restart || e.Kind == Pause || e.Kind == CrashStore) && slices.Contains(tree, e.Member):
			role = "a holder of a source, a member of its tree"
		}
		if role != "" && end.Add(o.Need+c.m.Settle).After(o.Deadline) {
			return fmt.Sprintf("%s (%s) left less than it needs to start again", e, role)
		}
	}
	return c.touched(o, []int{o.Member}, nil)
}

// availableSources are o's sources with a copy from Need before its
// deadline that no fault touched until it answered.
func (c *checker) availableSources(o *Op) []string {
	latest := o.Deadline.Add(-o.Need)
	var out []string
	for _, s := range o.Sources {
		if c.x.deleteBegan(s, o.End) != nil {
			continue
		}
		for _, hd := range c.x.holders(s) {
			if hd.from.After(latest) || c.x.gone(hd, s, o.End) != "" || c.storeCrashed(hd.member, o) {
				continue
			}
			out = append(out, s)
			break
		}
	}
	return out
}

func (c *checker) storeCrashed(member int, o *Op) bool {
	for _, e := range c.x.h.Events {
		if e.Kind == CrashStore && e.Member == member && e.Begin.Before(o.End) && !e.End.Before(o.Begin) {
			return true
		}
	}
	return false
}

// capacity: CAPACITY only when the member's pinned objects and the
// copies it was busy with leave no room for the object.
func (c *checker) capacity(o *Op) {
	if c.m.Capacity <= 0 {
		c.fail(o, RuleCapacity, "the members' capacity is unbounded")
		return
	}
	if o.Size > c.m.Capacity {
		c.rep.Excuses[o.ID] = "larger than a member's capacity"
		return
	}
	ms := []int{o.Member}
	if o.Kind == Reduce {
		ms = c.reduceMembers(o)
	}
	for _, m := range ms {
		need := o.Size
		if o.Kind == Reduce {
			need = max(need, c.footprint(o, m))
		}
		if used := c.used(m, o); used+need > c.m.Capacity {
			c.rep.Excuses[o.ID] = fmt.Sprintf("member %d had %d of %d bytes pinned or busy, and the call needed %d there", m, used, c.m.Capacity, need)
			return
		}
	}
	c.fail(o, RuleCapacity, "%d bytes; members %v had room (at most %d of %d bytes pinned or busy)", o.Size, ms, c.used(o.Member, o), c.m.Capacity)
}

// used is the most member m can have had pinned or busy while o ran:
// its creators' copies and the targets of Reduces it may have worked for,
// not deleted before o began, the other calls that overlapped o and
// held space there (Gets it made, whether they returned the object or
// not, Reduces it worked for), and the cached copies it held that
// another member's call overlapping o may have been reading (served).
func (c *checker) used(m int, o *Op) int64 {
	n, counted := int64(0), map[string]bool{}
	for i := range c.x.h.Ops {
		q := &c.x.h.Ops[i]
		if q != o && q.Kind == Get && q.Member == m && q.Begin.Before(o.End) && q.End.After(o.Begin) {
			counted[q.Object] = true // the Get below counts it
		}
	}
	for i := range c.x.h.Ops {
		q := &c.x.h.Ops[i]
		if q == o || !q.Begin.Before(o.End) {
			continue
		}
		overlaps := q.End.After(o.Begin)
		switch q.Kind {
		case Put:
			if q.Member == m && (ok(q) || overlaps) && c.x.deleteDone(q.Object, o.Begin) == nil {
				n += q.Size
			}
		case Get:
			// A Get that failed returned no bytes, but its fetch held
			// room for the object while it ran: its Put's size.
			if q.Member == m && overlaps {
				n += max(q.Size, c.x.sizeOf(q.Object))
			}
		case Reduce:
			// The target is pinned where the Reduce put it (a root or an
			// AllReduce's participants, which the history does not
			// name: any of its members) until a Delete; a position's
			// output takes room while it runs.
			if slices.Contains(c.reduceMembers(q), m) && c.x.deleteDone(q.Object, o.Begin) == nil {
				n += q.Size
				if overlaps {
					n += max(q.Size, c.footprint(q, m)-q.Size)
				}
			}
		}
		if q.Member != m && overlaps {
			n += c.served(m, q, o, counted)
		}
	}
	return n
}

// served is what of the cached copies m held call q (another member's,
// overlapping o) may have been reading from m: a store neither evicts
// nor makes room from a copy it is sending. (The in-memory soak's seed
// 6001702: a member sent its cached copy of a 0.98 MB object to three
// readers, and a Get of 0.9 MB there answered CAPACITY.) Each copy
// counts once, in counted.
func (c *checker) served(m int, q, o *Op, counted map[string]bool) int64 {
	var ids []string
	switch q.Kind {
	case Get:
		ids = []string{q.Object}
	case Reduce:
		ids = q.Sources
	}
	var n int64
	for _, id := range ids {
		if counted[id] || c.x.deleteDone(id, o.Begin) != nil {
			continue
		}
		for _, hd := range c.x.holders(id) {
			if hd.member == m && !hd.pinned && hd.from.Before(o.End) && c.x.gone(hd, id, o.Begin) == "" {
				counted[id] = true
				n += c.x.sizeOf(id)
				break
			}
		}
	}
	return n
}

// footprint is the most room Reduce r takes on member m while it runs,
// besides m's own pinned copies: the target's copy (a root's, or an
// AllReduce participant's); an output per position m runs, placed at a
// source's copy m holds (a tree position's is the target's size, and a
// sliced AllReduce's chain positions of one source add up to it); for an
// AllReduce of every source, which may be sliced, the copies of the
// other participants' slices that the ring relays (under the target's
// size); and the copies of sources m holds that are not its own pinned
// ones, busy while they are read. A participant of a sliced AllReduce
// thus needs three times the target's size beside its source.
func (c *checker) footprint(r *Op, m int) int64 {
	var held, busy int64
	for _, s := range r.Sources {
		mine, pinned := false, false
		for _, hd := range c.x.holders(s) {
			if hd.member == m && hd.from.Before(r.End) {
				mine, pinned = true, pinned || hd.pinned
			}
		}
		if mine {
			held++
			if !pinned {
				busy++
			}
		}
	}
	n := 1 + held + busy
	if held > 0 && r.All && r.Num == len(r.Sources) {
		n++
	}
	return n * r.Size
}
