package history

import (
	"hash/fnv"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/stallwatch"
	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func reduction(target string, ids []string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(target + "=" + strings.Join(slices.Sorted(slices.Values(ids)), "+")))
	return h.Sum64()
}

var model = Model{Grace: time.Second, Settle: 500 * time.Millisecond, Reduction: reduction}

const (
	ok_       = messages.ErrorCode_OK
	lost      = messages.ErrorCode_LOST
	timeout   = messages.ErrorCode_TIMEOUT
	notFound  = messages.ErrorCode_NOT_FOUND
	unavail   = messages.ErrorCode_UNAVAILABLE
	sumOfX    = 0xabc
	sizeOfX   = 100
	everyRule = 13
)

// op makes an op of a hand-made history: from begin to end (seconds),
// with a deadline 4 s after begin and a measured need of 0.5 s.
func op(id int, k OpKind, member int, obj string, begin, end float64, code messages.ErrorCode) Op {
	return Op{ID: id, Kind: k, Member: member, Object: obj, Hosts: [2]int{7, 7}, Sum: sumOfX, Size: sizeOfX,
		Begin: at(begin), End: at(end), Deadline: at(begin + 4), Need: 500 * time.Millisecond, Code: code}
}

func putX() Op { return op(1, Put, 0, "x", 0, 0.1, ok_) }

func reduceOp(id int, code messages.ErrorCode, reduced ...string) Op {
	r := op(id, Reduce, 3, "t", 0.2, 1, code)
	r.Sources, r.Num = []string{"a", "b"}, 2
	r.Reduced = reduced
	for _, s := range r.Sources {
		if !slices.Contains(reduced, s) {
			r.Unreduced = append(r.Unreduced, s)
		}
	}
	return r
}

func sources() []Op {
	a, b := op(10, Put, 0, "a", 0, 0.1, ok_), op(11, Put, 1, "b", 0, 0.1, ok_)
	return []Op{a, b}
}

// readerOfA is a Get by member 4 that returned source a: a second
// holder of it, where a reduce tree may place a.
func readerOfA() Op { return op(12, Get, 4, "a", 0.1, 0.15, ok_) }

func kill(member int, s float64) Event {
	return Event{Kind: Kill, Member: member, Begin: at(s), End: at(s + 0.01)}
}

func with(o Op, f func(*Op)) Op { f(&o); return o }

// readT is a Get by member 2 that returned the reduction of a and b into
// t, reduceOp's target.
func readT() Op {
	return with(op(6, Get, 2, "t", 0.4, 0.5, ok_), func(o *Op) { o.Sum = reduction("t", []string{"a", "b"}) })
}

// Every rule rejects a history that breaks it, and accepts its nearest
// history that keeps it.
func TestCheck(t *testing.T) {
	getX := func(code messages.ErrorCode) Op { return op(2, Get, 1, "x", 1, 2, code) }
	cases := []struct {
		name string
		h    History
		want Rule // "" accepts
	}{
		{"a get of the put bytes", History{Ops: []Op{putX(), getX(ok_)}}, ""},
		{"late answer", History{Ops: []Op{putX(), with(getX(ok_), func(o *Op) { o.End = at(6.5) })}}, RuleLate},
		{"late answer after a cancel", History{Ops: []Op{putX(), with(getX(messages.ErrorCode_CANCELED), func(o *Op) { o.Canceled, o.End = at(1.5), at(3) })}}, RuleLate},
		{"INTERNAL", History{Ops: []Op{putX(), getX(messages.ErrorCode_INTERNAL)}}, RuleCode},
		{"CONFLICT", History{Ops: []Op{putX(), getX(messages.ErrorCode_CONFLICT)}}, RuleCode},
		{"other bytes", History{Ops: []Op{putX(), with(getX(ok_), func(o *Op) { o.Sum = 1 })}}, RuleBytes},
		{"bytes of an id never put", History{Ops: []Op{getX(ok_)}}, RuleBytes},
		{"read after a delete completed", History{Ops: []Op{putX(), op(3, Delete, 0, "x", 0.2, 0.5, ok_), getX(ok_)}}, RuleAfterDelete},
		{"read while a delete ran", History{Ops: []Op{putX(), op(3, Delete, 0, "x", 0.2, 1.5, ok_), getX(ok_)}}, ""},
		{"LOST with the creator alive", History{Ops: []Op{putX(), getX(lost)}}, RuleLost},
		{"LOST once the creator died", History{Ops: []Op{putX(), getX(lost)}, Events: []Event{kill(0, 0.5)}}, ""},
		{"LOST with a reader's copy left", History{Ops: []Op{putX(), op(4, Get, 2, "x", 0.2, 0.3, ok_), getX(lost)}, Events: []Event{kill(0, 0.5)}}, RuleLost},
		{"LOST once the reader's copy was evicted", History{Ops: []Op{putX(), op(4, Get, 2, "x", 0.2, 0.3, ok_), getX(lost)},
			Events: []Event{kill(0, 0.5), {Kind: Evict, Member: 2, Object: "x", Begin: at(0.6), End: at(0.6)}}}, ""},
		{"an evict of a pinned copy is no loss", History{Ops: []Op{putX(), getX(lost)},
			Events: []Event{{Kind: Evict, Member: 0, Object: "x", Begin: at(0.6), End: at(0.6)}}}, RuleLost},
		{"LOST of an id never put", History{Ops: []Op{getX(lost)}}, RuleLost},
		{"LOST answering a put", History{Ops: []Op{with(putX(), func(o *Op) { o.Code = lost })}, Events: []Event{kill(0, 0.05)}}, RuleLost},
		{"LOST of an object whose put failed with its creator", History{Ops: []Op{with(putX(), func(o *Op) { o.Code = unavail }), getX(lost)},
			Events: []Event{kill(0, 0.05)}}, ""},
		{"LOST of an object put while the get ran", History{Ops: []Op{with(putX(), func(o *Op) { o.End = at(1.5) }), getX(lost)}}, RuleLost},
		{"NOT_FOUND of an object readable", History{Ops: []Op{putX(), getX(notFound)}}, RuleNotFound},
		{"NOT_FOUND before the put", History{Ops: []Op{op(1, Put, 0, "x", 3, 3.1, ok_), getX(notFound)}}, ""},
		{"NOT_FOUND once a delete began", History{Ops: []Op{putX(), op(3, Delete, 0, "x", 1.5, 3, ok_), getX(notFound)}}, ""},
		{"a delete NOT_FOUND of an object readable", History{Ops: []Op{putX(), op(3, Delete, 2, "x", 1, 2, notFound)}}, RuleNotFound},
		{"a delete NOT_FOUND of an object read, whose put failed", History{Ops: []Op{with(putX(), func(o *Op) { o.Code = timeout }),
			op(4, Get, 1, "x", 0.2, 0.5, ok_), op(3, Delete, 2, "x", 1, 2, notFound)}, Events: []Event{kill(0, 0.05)}}, RuleNotFound},
		{"a delete NOT_FOUND of an object lost", History{Ops: []Op{putX(), op(3, Delete, 2, "x", 1, 2, notFound)}, Events: []Event{kill(0, 0.5)}}, RuleNotFound},
		{"a delete NOT_FOUND while another delete ran", History{Ops: []Op{putX(), op(4, Delete, 1, "x", 0.9, 1.5, ok_), op(3, Delete, 2, "x", 1, 2, notFound)}}, ""},
		{"a delete NOT_FOUND once another delete was done", History{Ops: []Op{putX(), op(4, Delete, 1, "x", 0.2, 0.5, ok_), op(3, Delete, 2, "x", 1, 2, notFound)}}, ""},
		{"a delete NOT_FOUND of an id whose put failed", History{Ops: []Op{with(putX(), func(o *Op) { o.Code = unavail }), op(3, Delete, 2, "x", 1, 2, notFound)},
			Events: []Event{kill(0, 0.05)}}, ""},
		{"a delete NOT_FOUND while its put ran", History{Ops: []Op{with(putX(), func(o *Op) { o.End = at(1.5) }), op(3, Delete, 2, "x", 1, 2, notFound)}}, ""},
		{"a delete NOT_FOUND of an id never put", History{Ops: []Op{op(3, Delete, 2, "x", 1, 2, notFound)}}, ""},
		{"DELETED answering the only delete", History{Ops: []Op{putX(), op(3, Delete, 2, "x", 1, 2, messages.ErrorCode_DELETED)}}, RuleDeleted},
		{"DELETED with no delete", History{Ops: []Op{putX(), getX(messages.ErrorCode_DELETED)}}, RuleDeleted},
		{"DELETED once a delete began", History{Ops: []Op{putX(), op(3, Delete, 0, "x", 1.5, 3, ok_), getX(messages.ErrorCode_DELETED)}}, ""},
		{"TIMEOUT of a readable object", History{Ops: []Op{putX(), getX(timeout)}}, RuleTimeout},
		{"UNAVAILABLE with a far member killed", History{Ops: []Op{putX(), getX(unavail)}, Events: []Event{kill(5, 1.5)}}, RuleTimeout},
		{"TIMEOUT with the caller killed", History{Ops: []Op{putX(), getX(timeout)}, Events: []Event{kill(1, 1.5)}}, ""},
		{"TIMEOUT with the shard's host killed just before", History{Ops: []Op{putX(), getX(timeout)}, Events: []Event{kill(7, 0.7)}}, ""},
		{"TIMEOUT with the object's fetch stalled", History{Ops: []Op{putX(), getX(timeout)},
			Events: []Event{{Kind: Stall, Member: 4, Object: "x", Begin: at(1.2), End: at(1.8)}}}, ""},
		{"TIMEOUT under a deadline below the need", History{Ops: []Op{putX(), with(getX(timeout), func(o *Op) { o.Need = 5 * time.Second })}}, ""},
		{"TIMEOUT of an object put late", History{Ops: []Op{op(1, Put, 0, "x", 4.6, 4.7, ok_), getX(timeout)}}, ""},
		{"CANCELED uncanceled", History{Ops: []Op{putX(), getX(messages.ErrorCode_CANCELED)}}, RuleCanceled},
		{"CANCELED canceled", History{Ops: []Op{putX(), with(getX(messages.ErrorCode_CANCELED), func(o *Op) { o.Canceled = at(1.5) })}}, ""},
		{"CAPACITY unbounded", History{Ops: []Op{putX(), getX(messages.ErrorCode_CAPACITY)}}, RuleCapacity},
		{"RESET of a plain object", History{Ops: []Op{putX(), getX(messages.ErrorCode_RESET)}}, RuleReset},
		{"RESET of a target being reduced", History{Ops: append(sources(), reduceOp(5, ok_, "a", "b"), op(6, Get, 2, "t", 0.5, 0.8, messages.ErrorCode_RESET))}, ""},
		{"a reduce of num sources", History{Ops: append(sources(), reduceOp(5, ok_, "a", "b"))}, ""},
		{"a reduce of too few sources", History{Ops: append(sources(), reduceOp(5, ok_, "a"))}, RuleReduced},
		{"an allreduce of the survivors", History{Ops: append(sources(), with(reduceOp(5, ok_, "a"), func(o *Op) { o.All = true })),
			Events: []Event{kill(1, 0.5)}}, ""},
		{"an allreduce short of a source still held", History{Ops: append(sources(), with(reduceOp(5, ok_, "a"), func(o *Op) { o.All = true }))}, RuleReduced},
		{"a reduce naming a source twice", History{Ops: append(sources(), with(reduceOp(5, ok_, "a", "a"), func(o *Op) { o.Unreduced = []string{"b"} }))}, RuleReduced},
		{"a target of the reduced sources", History{Ops: append(sources(), reduceOp(5, ok_, "a", "b"),
			with(op(6, Get, 2, "t", 1.5, 2, ok_), func(o *Op) { o.Sum = reduction("t", []string{"b", "a"}) }))}, ""},
		{"a canceled reduce's target read after its answer", History{Ops: append(sources(), with(reduceOp(5, messages.ErrorCode_CANCELED), func(o *Op) { o.Canceled = at(0.9) }),
			with(op(6, Get, 2, "t", 1.5, 2, ok_), func(o *Op) { o.Sum = reduction("t", []string{"b", "a"}) }))}, ""},
		{"an abandoned reduce's target read after its answer", History{Ops: append(sources(), with(reduceOp(5, messages.ErrorCode_CANCELED), func(o *Op) { o.Canceled, o.Abandoned = at(0.9), true }),
			with(op(6, Get, 2, "t", 1.5, 2, ok_), func(o *Op) { o.Sum = reduction("t", []string{"b", "a"}) }))}, RuleReduction},
		{"a target of other sources", History{Ops: append(sources(), reduceOp(5, ok_, "a", "b"),
			with(op(6, Get, 2, "t", 1.5, 2, ok_), func(o *Op) { o.Sum = reduction("t", []string{"a"}) }))}, RuleReduction},
		{"a reduce TIMEOUT with its sources available", History{Ops: append(sources(), reduceOp(5, timeout))}, RuleTimeout},
		{"a reduce TIMEOUT with a source's creator killed", History{Ops: append(sources(), reduceOp(5, timeout)), Events: []Event{kill(1, 0.5)}}, ""},
		{"a reduce TIMEOUT with its coordinator killed early", History{Ops: append(sources(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{kill(7, 0.5)}}, RuleTimeout},
		{"a reduce TIMEOUT with its coordinator killed late", History{Ops: append(sources(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{kill(7, 3.5)}}, ""},
		{"a reduce TIMEOUT with its caller killed", History{Ops: append(sources(), reduceOp(5, timeout)), Events: []Event{kill(3, 0.5)}}, ""},
		{"a reduce TIMEOUT with a source's data stalled while it ran", History{Ops: append(sources(), reduceOp(5, timeout)),
			Events: []Event{{Kind: Stall, Member: 4, Object: "a", Begin: at(0.5), End: at(1.5)}}}, ""},
		{"a reduce TIMEOUT with a source's data stalled long before it", History{Ops: append(sources(), reduceOp(5, timeout)),
			Events: []Event{{Kind: Stall, Member: 4, Object: "a", Begin: at(-3), End: at(-2.9)}}}, RuleTimeout},
		{"a reduce TIMEOUT with a tree member killed early", History{Ops: append(sources(), readerOfA(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{kill(4, 0.5)}}, RuleTimeout},
		{"a reduce TIMEOUT with a tree member killed late", History{Ops: append(sources(), readerOfA(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{kill(4, 3.5)}}, ""},
		{"a reduce TIMEOUT with a tree member's store crashed late", History{Ops: append(sources(), readerOfA(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{{Kind: CrashStore, Member: 4, Begin: at(3.5), End: at(3.6)}}}, ""},
		{"a reduce TIMEOUT with a member outside it killed late", History{Ops: append(sources(), readerOfA(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{kill(6, 3.5)}}, RuleTimeout},
		{"a reduce TIMEOUT with its coordinator paused until late", History{Ops: append(sources(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{{Kind: Pause, Member: 7, Begin: at(0.5), End: at(3.5)}}}, ""},
		{"a reduce TIMEOUT with its coordinator paused briefly early", History{Ops: append(sources(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{{Kind: Pause, Member: 7, Begin: at(0.5), End: at(1)}}}, RuleTimeout},
		{"a reduce TIMEOUT with its coordinator's shard crashed late", History{Ops: append(sources(), with(reduceOp(5, timeout), func(o *Op) { o.End = at(4.2) })),
			Events: []Event{{Kind: CrashShard, Member: -1, Shard: 0, Begin: at(3.5), End: at(3.5)}}}, ""},
		{"a reduce LOST with its sources held", History{Ops: append(sources(), reduceOp(5, lost))}, RuleLost},
		{"a reduce LOST with a source lost", History{Ops: append(sources(), reduceOp(5, lost)), Events: []Event{kill(0, 0.5)}}, ""},
		{"a reduce LOST of its own result, read, its coordinator's member killed", History{Ops: append(sources(), reduceOp(5, lost), readT()),
			Events: []Event{kill(7, 0.6)}}, ""},
		{"a reduce LOST of its own result, read, its coordinator's shard crashed", History{Ops: append(sources(), reduceOp(5, lost), readT()),
			Events: []Event{{Kind: CrashShard, Member: -1, Shard: 0, Begin: at(0.6), End: at(0.6)}}}, ""},
		{"a reduce LOST of its own result, read, another member killed", History{Ops: append(sources(), reduceOp(5, lost), readT()),
			Events: []Event{kill(6, 0.6)}}, RuleLost},
		{"a reduce LOST of its own result, never read, its coordinator's member killed", History{Ops: append(sources(), reduceOp(5, lost)),
			Events: []Event{kill(7, 0.6)}}, RuleLost},
	}
	rules := map[Rule]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := Check(tc.h, model)
			var got []Rule
			for _, v := range rep.Violations {
				got = append(got, v.Rule)
			}
			if tc.want == "" && len(got) > 0 {
				t.Fatalf("rejected: %v", rep.Violations)
			}
			if tc.want != "" && !slices.Contains(got, tc.want) {
				t.Fatalf("violations %v; want one of rule %q", rep.Violations, tc.want)
			}
		})
		rules[tc.want] = true
	}
	if len(rules) != everyRule+1 {
		t.Errorf("the cases reject %d rules; there are %d", len(rules)-1, everyRule)
	}
}

// A history whose failures are all explained records what explained
// each.
func TestCheckRecordsExcuses(t *testing.T) {
	h := History{Ops: []Op{putX(), op(2, Get, 1, "x", 1, 2, lost)}, Events: []Event{kill(0, 0.5)}}
	rep := Check(h, model)
	if len(rep.Violations) != 0 || !strings.Contains(rep.Excuses[2], "kill member 0") {
		t.Fatalf("violations %v, excuses %v; want LOST excused by the creator's kill", rep.Violations, rep.Excuses)
	}
}

func TestCapacity(t *testing.T) {
	m := model
	m.Capacity = 1000
	full := op(1, Put, 1, "y", 0, 0.1, ok_)
	full.Size = 950
	h := History{Ops: []Op{putX(), op(2, Get, 1, "x", 1, 2, messages.ErrorCode_CAPACITY)}}
	if rep := Check(h, m); len(rep.Violations) != 1 || rep.Violations[0].Rule != RuleCapacity {
		t.Fatalf("CAPACITY on an empty member: %v", rep.Violations)
	}
	h.Ops = append(h.Ops, full)
	if rep := Check(h, m); len(rep.Violations) != 0 {
		t.Fatalf("CAPACITY on a member with 950 of 1000 bytes pinned: %v", rep.Violations)
	}
	h.Ops = append(h.Ops, op(3, Delete, 1, "y", 0.2, 0.3, ok_))
	if rep := Check(h, m); len(rep.Violations) != 1 {
		t.Fatalf("CAPACITY once the pinned object was deleted: %v", rep.Violations)
	}
	// A Get on the member that overlapped the call and failed (its
	// object's creator died while it fetched) held room for the object
	// all the same: the history knows its size from the Put.
	z := op(7, Put, 0, "z", 0, 0.1, ok_)
	z.Size = 920
	fetching := op(8, Get, 1, "z", 0.5, 3, unavail)
	fetching.Size = 0
	h.Ops = append(h.Ops, z, fetching)
	h.Events = append(h.Events, kill(0, 2.6))
	if rep := Check(h, m); len(rep.Violations) != 0 {
		t.Fatalf("CAPACITY beside a 920-byte fetch that failed later: %v", rep.Violations)
	}
	fetching.Begin, fetching.End = at(2.5), at(3)
	h.Ops[len(h.Ops)-1] = fetching
	if rep := Check(h, m); len(rep.Violations) != 1 {
		t.Fatalf("CAPACITY beside a fetch that began after it answered: %v", rep.Violations)
	}
	// A Reduce's target is pinned where it was made, which the history
	// does not name: any member of the Reduce may hold it.
	src := op(4, Put, 1, "s", 0, 0.1, ok_)
	red := reduceOp(5, ok_, "s")
	red.Sources, red.Num, red.Unreduced, red.Size = []string{"s"}, 1, nil, 850
	h.Ops = append(h.Ops, src, red)
	if rep := Check(h, m); len(rep.Violations) != 0 {
		t.Fatalf("CAPACITY on a member that may hold a Reduce's target of 850 bytes: %v", rep.Violations)
	}
}

// A sliced AllReduce's participant holds, beside its source, the
// target's copy, its chain positions' outputs and the ring's relays of
// the other slices: about three times the target's size, all busy while
// the AllReduce runs. Its CAPACITY is explained where that does not fit
// beside the participant's pinned source, and not where it does, nor on
// a member that holds no source (the oracle counted the target's size
// alone, and failed true CAPACITY answers of sliced AllReduces).
func TestCapacityOfAnAllReduceParticipant(t *testing.T) {
	m := model
	all := func(code messages.ErrorCode) Op {
		r := reduceOp(5, code)
		r.All, r.Reduced, r.Unreduced = true, nil, nil
		return r
	}
	for _, c := range []struct {
		name     string
		capacity int64
		want     Rule
	}{
		{"3 targets and the source do not fit", 3*sizeOfX + sizeOfX - sizeOfX/2, ""},
		{"they fit", 4*sizeOfX + sizeOfX/2, RuleCapacity},
	} {
		m.Capacity = c.capacity
		h := History{Ops: append(sources(), all(messages.ErrorCode_CAPACITY))}
		rep := Check(h, m)
		if got := rules(rep); c.want == "" && len(got) != 0 || c.want != "" && !slices.Equal(got, []Rule{c.want}) {
			t.Errorf("%s (capacity %d): violations %v, want %q", c.name, c.capacity, rep.Violations, c.want)
		}
	}
	// A plain Reduce's positions need the target's size at a source's
	// member, once each, and no relays.
	m.Capacity = 3*sizeOfX + sizeOfX/2
	r := all(messages.ErrorCode_CAPACITY)
	r.All = false
	if rep := Check(History{Ops: append(sources(), r)}, m); !slices.Equal(rules(rep), []Rule{RuleCapacity}) {
		t.Errorf("a tree Reduce whose position and target fit beside its source: violations %v, want CAPACITY", rep.Violations)
	}
}

func rules(rep Report) []Rule {
	var out []Rule
	for _, v := range rep.Violations {
		out = append(out, v.Rule)
	}
	return out
}

// An answer late by a pause of the recorder is excused only as far as
// the pause covers the time past its due: a pause before the deadline,
// or one shorter than the lateness less the grace, excuses nothing.
func TestCheckExcusesLatenessOnlyByTheRecordersPausesPastItsDue(t *testing.T) {
	late := Op{ID: 0, Kind: Put, Member: 0, Object: "x", Sum: sumOfX, Size: sizeOfX, Begin: at(0), Deadline: at(20), End: at(50), Code: ok_}
	for _, tc := range []struct {
		name    string
		gaps    [][2]float64
		excused bool
	}{
		{"the recorder paused through the lateness", [][2]float64{{15, 49}}, true},
		{"two pauses that add up to the lateness less the grace", [][2]float64{{20, 35}, {36, 50}}, true},
		{"a pause before the deadline", [][2]float64{{5, 19}}, false},
		{"a pause shorter than the lateness less the grace", [][2]float64{{30, 40}}, false},
		{"no pause", nil, false},
	} {
		m := model
		m.Grace = 2 * time.Second
		w := &stallwatch.Watch{}
		for _, g := range tc.gaps {
			w.Add(at(g[0]), at(g[1]))
		}
		m.Paused = w.Within
		rep := Check(History{Ops: []Op{late}}, m)
		if excused := len(rep.Violations) == 0; excused != tc.excused {
			t.Errorf("%s: violations %v, want excused %v", tc.name, rep.Violations, tc.excused)
		}
		if tc.excused && rep.Paused[0] == "" {
			t.Errorf("%s: excused without a word in Report.Paused", tc.name)
		}
	}
}

// A cached copy that another member may be reading takes room: a store
// does not evict a copy it is sending. Only while such a read overlaps
// the call, and only a copy the member held by then.
func TestCapacityCountsCachedCopiesBeingServed(t *testing.T) {
	m := model
	m.Capacity = 1000
	x := putX() // member 0's
	x.Size = 600
	cached := op(2, Get, 1, "x", 0.2, 0.3, ok_) // member 1 holds a copy
	cached.Size = 600
	reader := op(3, Get, 2, "x", 0.9, 1.5, ok_) // member 2 reads x meanwhile
	reader.Size = 600
	y := op(4, Put, 0, "y", 0, 0.1, ok_)
	y.Size = 500
	full := op(5, Get, 1, "y", 1, 1.1, messages.ErrorCode_CAPACITY) // 600 + 500 > 1000
	full.Size = 500
	cases := []struct {
		name string
		ops  []Op
		want Rule
	}{
		{"a read of the member's cached copy overlaps the call", []Op{x, cached, reader, y, full}, ""},
		{"no read of it overlaps the call", []Op{x, cached, with(reader, func(o *Op) { o.Begin, o.End = at(1.2), at(1.5) }), y, full}, RuleCapacity},
		{"the member got its copy after the call", []Op{x, with(cached, func(o *Op) { o.Begin, o.End = at(1.2), at(1.3) }), reader, y, full}, RuleCapacity},
		{"the read is of another object", []Op{x, cached, with(reader, func(o *Op) { o.Object = "y" }), y, full}, RuleCapacity},
	}
	for _, tc := range cases {
		rep := Check(History{Ops: tc.ops}, m)
		if got := rules(rep); (tc.want == "") != (len(got) == 0) || tc.want != "" && !slices.Equal(got, []Rule{tc.want}) {
			t.Errorf("%s: violations %v, want %q", tc.name, rep.Violations, tc.want)
		}
	}
}
