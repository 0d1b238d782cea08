package directory

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// InlineIndex is the one part of a LocationTable that other goroutines
// read: the plain inline objects it serves as they are, so that a Locate
// asking only for such bytes (messages.Locate.inline_only) is answered on
// the goroutine that received it — the data-plane connection, or the
// caller's own in process — without a message to the table's actor and
// without waking it. A Get of a small object then costs one round trip
// and the table's lookup, where a Locate through the table costs a
// mailbox hop, a step and a recorded copy.
//
// Only the table writes it, inside its Step; readers see immutable
// snapshots (copy on write per bucket), never a map the table mutates.
// The rule that keeps it correct: an id is in the index only while a
// no-copy Locate stepped through the table now would be answered with
// those bytes. The table publishes a plain Put's inline object when it
// registers it, and withdraws it in the same step that deletes,
// releases or loses it, before any answer of that step leaves, so a Get
// that starts after a Delete was answered finds nothing here; anything
// absent is merely asked of the table. A table's index is cleared when
// its shard stops serving (the shell's Close), before its successor can
// answer a Delete.
type InlineIndex struct {
	seed    maphash.Seed
	buckets [inlineBuckets]atomic.Pointer[[]inlineSlot]
	n       atomic.Int64
}

// inlineSlot is one object of a bucket with its id's hash beside it, so
// that a lookup passes the other objects of its bucket without reading
// them.
type inlineSlot struct {
	hash uint64
	o    *InlineObject
}

// inlineBuckets spreads the index so that a write copies about
// n/inlineBuckets entries: 24 at 100,000 inline objects in one shard.
const inlineBuckets = 4096

// InlineObject is one published inline object. Its fields never change
// once published; only its uplink estimate does, under its own lock.
type InlineObject struct {
	ID          string
	Size        int64
	Fingerprint uint64
	// Data is the table's own copy of the bytes: read-only.
	Data []byte

	uplink float64
	mu     sync.Mutex
	queue  inlineQueue
}

// NewInlineIndex returns an empty index.
func NewInlineIndex() *InlineIndex { return &InlineIndex{seed: maphash.MakeSeed()} }

func (x *InlineIndex) bucket(id string) (*atomic.Pointer[[]inlineSlot], uint64) {
	h := maphash.String(x.seed, id)
	return &x.buckets[h%inlineBuckets], h
}

// Lookup returns id's published object, or nil. Safe from any goroutine.
func (x *InlineIndex) Lookup(id string) *InlineObject {
	if x == nil {
		return nil
	}
	p, h := x.bucket(id)
	b := p.Load()
	if b == nil {
		return nil
	}
	for _, s := range *b {
		if s.hash == h && s.o.ID == id {
			return s.o
		}
	}
	return nil
}

// Len is how many objects are published.
func (x *InlineIndex) Len() int {
	if x == nil {
		return 0
	}
	return int(x.n.Load())
}

// publish adds o, in place of any earlier object of its id (the
// table's step only).
func (x *InlineIndex) publish(o *InlineObject) {
	if x == nil {
		return
	}
	p, h := x.bucket(o.ID)
	var next []inlineSlot
	if b := p.Load(); b != nil {
		next = slices.DeleteFunc(slices.Clone(*b), func(s inlineSlot) bool { return s.o.ID == o.ID })
		x.n.Add(int64(len(next) - len(*b)))
	}
	next = append(next, inlineSlot{h, o})
	p.Store(&next)
	x.n.Add(1)
}

// withdraw removes id (the table's step only); absent is a no-op.
func (x *InlineIndex) withdraw(id string) {
	if x == nil {
		return
	}
	p, h := x.bucket(id)
	b := p.Load()
	has := func(s inlineSlot) bool { return s.hash == h && s.o.ID == id }
	if b == nil || !slices.ContainsFunc(*b, has) {
		return
	}
	next := slices.DeleteFunc(slices.Clone(*b), has)
	if len(next) == 0 {
		p.Store(nil)
	} else {
		p.Store(&next)
	}
	x.n.Add(-1)
}

// Close withdraws everything: the table stops serving (its shard stops,
// moves or starts over). Called by the table's shell, on its goroutine.
func (x *InlineIndex) Close() {
	if x == nil {
		return
	}
	for i := range x.buckets {
		x.buckets[i].Store(nil)
	}
	x.n.Store(0)
}

// Answer reports whether a Locate arriving at now is answered with o's
// bytes, and counts them on the shard's uplink if so: as the table does
// (AnswerWithBytes), so that a hot object past the uplink's budget is
// asked of the table, which sends receivers to copies instead. The
// table's own answers keep their own count, so the two together may
// queue up to twice the budget.
func (o *InlineObject) Answer(now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	at := now
	if o.queue.at.After(at) {
		at = o.queue.at
	}
	q := InlineQueued(o.queue.queued, o.queue.at, at, o.uplink)
	if !AnswerWithBytes(q, o.Size, o.uplink) {
		o.queue = inlineQueue{queued: q, at: at}
		return false
	}
	o.queue = inlineQueue{queued: q + float64(o.Size), at: at}
	return true
}
