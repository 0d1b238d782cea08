// Package inlineindex is the published view of a directory shard's plain
// inline objects that the shard's Locates are answered from without its
// actor: written by the shard's table through directory.InlinePublisher,
// read by any goroutine.
package inlineindex

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// Index is the one part of a directory.LocationTable that other
// goroutines use (its TableConfig.Inline): the plain inline objects it serves as they are, so that a Locate
// of one is answered on the goroutine that received it (the data-plane
// connection's, or the caller's own in process) without a message to
// the table's actor and without waking it. A small Get then costs one
// round trip and a lookup, where a Locate through the table's actor
// costs a mailbox hop and a step before the answer.
//
// Only the table publishes and withdraws, inside its Step; readers see
// immutable snapshots (copy on write per bucket), never a map the table
// mutates. An answer given here records its receiver's copy with the
// object (Object.Answer), as the table's own inline answer does,
// before the bytes leave: every reader holds a copy, and the table
// takes those records into its locations at the start of its next step
// (Step drains them) or when it withdraws the object, before anything
// that step answers. The rule that keeps it correct: an id is in the
// index only while a Locate stepped through the table now would be
// answered with those bytes. The table publishes a plain Put's inline
// object when it registers it, and withdraws it in the same step that
// deletes, releases or marks it a Reduce's, before any answer of that
// step leaves, so a Get that starts after a Delete was answered finds
// nothing here, and every copy an answer here made is dropped by that
// Delete; anything absent is asked of the table. A table's index is
// cleared when its shard stops serving (the shell's Close), before its
// successor can answer a Delete.
type Index struct {
	seed    maphash.Seed
	buckets [inlineBuckets]atomic.Pointer[[]inlineSlot]
	n       atomic.Int64

	// recorded are the objects whose answers recorded readers since the
	// table last drained them; nRecorded is their count, for a step's
	// look without the lock.
	mu        sync.Mutex
	recorded  []*Object
	nRecorded atomic.Int32
}

// queue is an object's estimate of its answers' bytes still on the
// shard's uplink: queued as of at.
type queue struct {
	queued float64
	at     time.Time
}

// inlineSlot is one object of a bucket with its id's hash beside it, so
// that a lookup passes the other objects of its bucket without reading
// them.
type inlineSlot struct {
	hash uint64
	o    *Object
}

// inlineBuckets spreads the index so that a write copies about
// n/inlineBuckets entries: 24 at 100,000 inline objects in one shard.
const inlineBuckets = 4096

// Object is one published inline object. Its exported fields never
// change once published; its uplink estimate and the readers its
// answers recorded do, under its own lock.
type Object struct {
	ID          string
	Size        int64
	Fingerprint uint64
	// Data is the table's own copy of the bytes: read-only.
	Data []byte

	x      *Index
	uplink float64
	mu     sync.Mutex
	queue  queue
	// readers are the receivers answered here whose copies the table
	// has not taken yet (at most maxInlineReaders); withdrawn: the
	// table withdrew the object, and nothing more is answered here.
	readers   []*messages.NodeRef
	withdrawn bool
}

// maxInlineReaders bounds the copies one object's answers record before
// the table takes them: past it, Locates are asked of the table.
const maxInlineReaders = 1024

// New returns an empty index.
func New() *Index { return &Index{seed: maphash.MakeSeed()} }

func (x *Index) bucket(id string) (*atomic.Pointer[[]inlineSlot], uint64) {
	h := maphash.String(x.seed, id)
	return &x.buckets[h%inlineBuckets], h
}

// Lookup returns id's published object, or nil. Safe from any goroutine.
func (x *Index) Lookup(id string) *Object {
	if x == nil {
		return nil // no shard registered one
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
func (x *Index) Len() int {
	if x == nil {
		return 0
	}
	return int(x.n.Load())
}

// Publish implements directory.InlinePublisher: id's bytes are served
// from here, in place of any earlier object of the id.
func (x *Index) Publish(id string, size int64, fingerprint uint64, data []byte, uplink float64) {
	o := &Object{ID: id, Size: size, Fingerprint: fingerprint, Data: data, x: x, uplink: uplink}
	p, h := x.bucket(id)
	var next []inlineSlot
	if b := p.Load(); b != nil {
		next = slices.DeleteFunc(slices.Clone(*b), func(s inlineSlot) bool { return s.o.ID == id })
		x.n.Add(int64(len(next) - len(*b)))
	}
	next = append(next, inlineSlot{h, o})
	p.Store(&next)
	x.n.Add(1)
}

// Withdraw implements directory.InlinePublisher: id is served no more,
// and the readers its answers recorded that Drain did not hand over yet
// are returned (their copies exist). Absent: nothing.
func (x *Index) Withdraw(id string) []*messages.NodeRef {
	p, h := x.bucket(id)
	b := p.Load()
	if b == nil {
		return nil
	}
	i := slices.IndexFunc(*b, func(s inlineSlot) bool { return s.hash == h && s.o.ID == id })
	if i < 0 {
		return nil
	}
	o := (*b)[i].o
	next := slices.Delete(slices.Clone(*b), i, i+1)
	if len(next) == 0 {
		p.Store(nil)
	} else {
		p.Store(&next)
	}
	x.n.Add(-1)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.withdrawn = true
	readers := o.readers
	o.readers = nil
	return readers
}

// Drain implements directory.InlinePublisher: the readers the answers
// recorded since the last Drain, by object.
func (x *Index) Drain() []directory.InlineReaders {
	if x.nRecorded.Load() == 0 {
		return nil
	}
	x.mu.Lock()
	objs := x.recorded
	x.recorded = nil
	x.nRecorded.Store(0)
	x.mu.Unlock()
	out := make([]directory.InlineReaders, 0, len(objs))
	for _, o := range objs {
		o.mu.Lock()
		r := o.readers
		o.readers = nil
		o.mu.Unlock()
		if len(r) > 0 {
			out = append(out, directory.InlineReaders{ID: o.ID, Readers: r})
		}
	}
	return out
}

// Close withdraws everything: the table stops serving (its shard stops,
// moves or starts over). Called by the table's shell, on its goroutine.
func (x *Index) Close() {
	if x == nil {
		return
	}
	for i := range x.buckets {
		x.buckets[i].Store(nil)
	}
	x.n.Store(0)
}

// AnswerLocate answers l, arriving at now, from the published objects
// as the table's own inline answer would (Object.AnswerLocate). nil
// means the table answers l. A nil index answers nothing. The shard's
// actor shell asks it on the goroutine a Locate arrives on, the
// simulator at the shard's host, at the virtual now.
func (x *Index) AnswerLocate(l *messages.Locate, now time.Time) *messages.LocateReply {
	return x.Lookup(l.GetObjectId()).AnswerLocate(l, now)
}

// AnswerLocate answers l, a Locate of o arriving at now, as the table's
// own inline answer would: the bytes, with the receiver's copy recorded
// (Answer). nil means the table answers l: o is nil or not l's object,
// its uplink's budget is spent, or l names a sender that failed it (the
// table's failover rules) or, keeping a copy, no receiver (the table's
// refusal). For a caller that looked o up already (before decoding l).
func (o *Object) AnswerLocate(l *messages.Locate, now time.Time) *messages.LocateReply {
	reader, ok := o.readerOf(l)
	if !ok || !o.Answer(now, reader) {
		return nil
	}
	return &messages.LocateReply{ObjectId: o.ID, Size: o.Size, Fingerprint: o.Fingerprint, HasInline: true,
		InlineData: o.Data, Attempt: l.GetAttempt()}
}

// Answer reports whether a Locate arriving at now is answered here with
// o's bytes, and if so counts them on the shard's uplink, as the table
// does (AnswerWithBytes), so that a hot object past the uplink's budget
// is asked of the table, which sends receivers to copies instead (the
// table's own answers keep their own count, so the two together may
// queue up to twice the budget). A reader (nil for a receiver that
// keeps no copy) is recorded with the object before the answer, for the
// table to take (drain, withdraw). Not after the table withdrew o, nor
// past maxInlineReaders records it has not taken.
func (o *Object) Answer(now time.Time, reader *messages.NodeRef) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.withdrawn || (reader != nil && len(o.readers) >= maxInlineReaders) || !o.spendUplink(now) {
		return false
	}
	o.record(reader)
	return true
}

// readerOf is the reader l records if o answers it (nil: a receiver that
// keeps no copy), or false if the table must answer l: o is nil or not
// l's object, l names a sender that failed it (the table's failover
// rules), or it keeps a copy and names no receiver (the table's refusal).
func (o *Object) readerOf(l *messages.Locate) (reader *messages.NodeRef, ok bool) {
	if o == nil || l.GetObjectId() != o.ID || l.GetFailedSender() != nil {
		return nil, false
	}
	if !l.GetNoCopy() {
		if reader = l.GetReceiver(); reader.GetNodeId() == "" {
			return nil, false
		}
	}
	return reader, true
}

// spendUplink counts one copy of o's bytes leaving at now on the
// shard's uplink, as the table does (AnswerWithBytes), or reports that
// its budget is spent. Under o.mu.
func (o *Object) spendUplink(now time.Time) bool {
	at := now
	if o.queue.at.After(at) {
		at = o.queue.at
	}
	q := directory.InlineQueued(o.queue.queued, o.queue.at, at, o.uplink)
	if !directory.AnswerWithBytes(q, o.Size, o.uplink) {
		o.queue = queue{queued: q, at: at}
		return false
	}
	o.queue = queue{queued: q + float64(o.Size), at: at}
	return true
}

// record keeps reader (nil: none) for the table to take. Under o.mu,
// with room under maxInlineReaders checked by the caller.
func (o *Object) record(reader *messages.NodeRef) {
	if reader == nil {
		return
	}
	if len(o.readers) == 0 && o.x != nil {
		o.x.mu.Lock()
		o.x.recorded = append(o.x.recorded, o)
		o.x.nRecorded.Add(1)
		o.x.mu.Unlock()
	}
	o.readers = append(o.readers, reader)
}

// AnswerBatch answers the Locates of a Locate deputy's batch, all of o,
// arriving at now: answered[i] says whether ls[i] is answered with o's
// bytes (with its receiver's copy recorded, as Answer records it), which
// the batch's reply carries once, so the uplink's budget counts them once.
// A Locate that AnswerLocate would leave to the table (readerOf) is left,
// and so is every Locate when the budget is spent or the object
// withdrawn, and one whose reader finds maxInlineReaders recorded.
func (o *Object) AnswerBatch(ls []*messages.Locate, now time.Time) []bool {
	answered := make([]bool, len(ls))
	readers := make([]*messages.NodeRef, len(ls))
	some := false
	for i, l := range ls {
		readers[i], answered[i] = o.readerOf(l)
		some = some || answered[i]
	}
	if !some {
		return answered
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.withdrawn || !o.spendUplink(now) {
		clear(answered)
		return answered
	}
	for i, reader := range readers {
		if !answered[i] {
			continue
		}
		if reader != nil && len(o.readers) >= maxInlineReaders {
			answered[i] = false
			continue
		}
		o.record(reader)
	}
	return answered
}
