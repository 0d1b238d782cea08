package objstore

import (
	"container/list"
	"context"
	"io"
	"sync"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/messages"
)

// Object is one object's buffer in a node's Store. It is filled front to
// back by one writer; the bytes below Written are immutable, so readers
// share them without copying while the rest is still arriving (pipelining).
type Object struct {
	id string

	mu          sync.Mutex
	size        int64 // -1 until the receiver learns it from the directory
	buf         []byte
	written     int64
	done        bool
	err         error         // set when the copy failed or the object was dropped
	changed     chan struct{} // closed and replaced whenever the state advances
	fingerprint uint64
	pinned      bool // the creator's copy: never evicted before Delete
	creator     bool
	readers     int           // open readers hold the object against eviction
	lru         *list.Element // in Store.lru while complete, unpinned and idle
	accounted   int64         // bytes charged against the store's capacity
	writerGen   uint64        // the generation of the current Writer
	// lent is set while a Writer holds Tail's memory (it may be writing
	// there outside the lock, e.g. a socket read in progress): a newer
	// Writer then gets a fresh buffer, so the superseded one's late bytes
	// can never land under bytes the newer one published.
	lent bool
	// epoch counts rewinds: a reader that began in an older epoch has
	// bytes that are no longer the object's and gets RESET.
	epoch uint64
	// settled are called once the object is complete or failed.
	settled []func()
	// producer is the Reduce whose root writes this target (see
	// Publication), and producerGen the generation of that root's task.
	producer    string
	producerGen int32
	// reduced are the sources of the result o holds, once committed: a
	// rebuilt shard answers an attempt of the same Reduce with them.
	reduced []string
	// readingRun is the running Reduce whose uncommitted target this
	// receiver's copy streams (see MarkReading).
	readingRun string
	// registration is the request id of the Put's CreateObject that
	// registered this creator copy (see SetRegistration).
	registration uint64
	// gather: o is a sliced AllReduce gather's copy of the target.
	gather bool
	// held: readers get no byte past size-1 until o is complete (see
	// HoldTail).
	held bool
}

func newObject(id string, size int64, pinned bool) *Object {
	o := &Object{id: id, size: size, pinned: pinned, creator: pinned, changed: make(chan struct{})}
	return o
}

// ID is the object id.
func (o *Object) ID() string { return o.id }

// Size is the object size, or -1 while it is not known yet.
func (o *Object) Size() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.size
}

// State reads at one instant the object's size (-1 before it is
// allocated), the bytes written, whether it is complete or pinned, and
// its error: what a fetch protocol's step reads of it.
func (o *Object) State() (size, written int64, done, pinned bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.size, o.written, o.done, o.pinned, o.err
}

// Pinned reports whether this is the creator's copy.
func (o *Object) Pinned() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pinned
}

// Fingerprint is the content fingerprint recorded at creation.
func (o *Object) Fingerprint() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.fingerprint
}

// Progress returns how many bytes exist, whether the copy is complete, and
// the error that ended it, if any.
func (o *Object) Progress() (written int64, done bool, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.written, o.done, o.err
}

// broadcast wakes every waiter. Callers hold o.mu.
func (o *Object) broadcast() {
	close(o.changed)
	o.changed = make(chan struct{})
	if (o.done || o.err != nil) && len(o.settled) > 0 {
		fns := o.settled
		o.settled = nil
		for _, fn := range fns {
			fn()
		}
	}
}

// OnSettled calls fn once, when the object is complete or failed (at once
// if it is): an actor waits on an object this way without a goroutine.
// fn runs under the object's lock, so it must only pass the news on (an
// actor message), never block or touch the object.
func (o *Object) OnSettled(fn func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.done || o.err != nil {
		fn()
		return
	}
	o.settled = append(o.settled, fn)
}

// SetRegistration records the request id of the CreateObject that
// registers this creator copy (a Put's; each attempt registers anew):
// its republication names it (PublishLocation.registration), so that a
// shard that learns the copy from it before the CreateObject arrives
// keeps it against the withdrawal of another attempt's registration.
func (o *Object) SetRegistration(requestID uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.registration = requestID
}

// SetProducer records that generation gen of the root of Reduce
// reduceID (or of a sliced AllReduce's gather) writes o, its target: a
// partial o is republished with the Reduce's id.
func (o *Object) SetProducer(reduceID string, gen int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.producer, o.producerGen = reduceID, gen
}

// SetReduced records the sources of the result o holds (a Reduce's
// committed target); the slice is kept, not copied.
func (o *Object) SetReduced(ids []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reduced = ids
}

// MarkRun records that Reduce run reduceID committed the result o holds,
// reducing the sources reduced (kept, not copied), unless o names a run
// already: a reader's or an AllReduce participant's copy of a target, so
// that its republication names the run too. It reports whether it did.
func (o *Object) MarkRun(reduceID string, reduced []string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.producer != "" {
		return false
	}
	o.producer, o.producerGen, o.reduced = reduceID, 0, reduced
	return true
}

// MarkReading records that o, a receiver's copy, streams the target of
// Reduce run reduceID before its commit: a partial o is republished with
// the run's id, and a shard rebuilt after the run's coordinator died
// drops it (nothing will finish it) rather than count it as what is left
// of a lost object. It marks nothing else: the copy is no run's product,
// and a release of the run does not drop it.
func (o *Object) MarkReading(reduceID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.readingRun = reduceID
}

// HoldTail withholds o's last byte from its readers until o is complete.
// A Reduce's tree root writes its target so: readers stream the rest as
// it is produced, but none can finish reading it (and no Get return it)
// before the coordinator takes that root's result and the root completes
// it (messages.ReduceCommit). A generation the coordinator does not take
// is rewound or dropped, and nobody ever read it whole.
func (o *Object) HoldTail() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held = true
}

// Uncommitted reports whether o is held (HoldTail) and not complete: a
// Reduce's copy of its target that no commit completed (yet).
func (o *Object) Uncommitted() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held && !o.done && o.err == nil
}

// HeldWhole reports whether o is held (HoldTail), written whole and not
// complete yet: a root's finished target that awaits its commit.
func (o *Object) HeldWhole() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.heldWholeLocked()
}

func (o *Object) heldWholeLocked() bool {
	return o.held && !o.done && o.err == nil && o.size >= 0 && o.written == o.size
}

// MarkGatherCopy records that a sliced AllReduce's gather writes o.
func (o *Object) MarkGatherCopy() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.gather = true
}

// GatherCopy says whether a sliced AllReduce's gather writes o.
func (o *Object) GatherCopy() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gather
}

// Producer is the Reduce, and its task's generation, that writes o
// ("" and 0 for any other object).
func (o *Object) Producer() (reduceID string, gen int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.producer, o.producerGen
}

// Publication is what node publishes of its copy of o when a directory
// shard rebuilds (PARTIAL or COMPLETE), and false for a copy with nothing
// to offer (not allocated yet, or failed).
func (o *Object) Publication(node *messages.NodeRef) (*messages.PublishLocation, bool) {
	size := o.Size()
	_, done, err := o.Progress()
	if size < 0 || err != nil {
		return nil, false
	}
	state := messages.LocationState_PARTIAL
	if done {
		state = messages.LocationState_COMPLETE
	}
	pub := &messages.PublishLocation{ObjectId: o.ID(), Node: node, State: state, Size: size,
		Fingerprint: o.Fingerprint(), Creator: o.Pinned()}
	o.mu.Lock()
	if pub.Creator {
		pub.Registration = o.registration
	}
	if !done {
		pub.ReduceId = o.producer
		if pub.ReduceId == "" {
			pub.ReduceId = o.readingRun
		}
	} else if o.producer != "" && o.reduced != nil {
		pub.ProducedBy, pub.ReducedIds = o.producer, o.reduced
	} else {
		// A reader's whole copy of a Reduce's target that heard nothing of
		// the commit names the run it streamed from: a shard rebuilt after
		// that run's members died can tell the run's own result from
		// another writer's object (directory: reduceTarget.readFrom).
		pub.ReduceId = o.readingRun
	}
	o.mu.Unlock()
	return pub, true
}

// SettleNotices is how many OnSettled notices wait for the object.
func (o *Object) SettleNotices() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.settled)
}

// Append copies p after the written bytes. It is for an object with one
// writer for its whole life (a Put); copies that can be resumed by another
// goroutine write through NewWriter.
func (o *Object) Append(p []byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.appendLocked(p)
}

// Writer appends to an object for as long as it is the object's newest
// writer. A fetch resumed after a restart takes a new Writer, so a chunk
// still in the hands of the superseded one can never land twice.
type Writer struct {
	o   *Object
	gen uint64
}

// NewWriter makes a Writer that supersedes every earlier one.
func (o *Object) NewWriter() *Writer {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.writerGen++
	if o.lent && o.size >= 0 {
		nb := bufalloc.Make(int(o.size))
		copy(nb, o.buf[:o.written]) // below written: immutable, shared by readers
		o.buf, o.lent = nb, false
	}
	return &Writer{o: o, gen: o.writerGen}
}

// Size is the object's size (-1 while unknown).
func (w *Writer) Size() int64 { return w.o.Size() }

// Append copies p after the written bytes, unless a newer writer exists.
func (w *Writer) Append(p []byte) error {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	return w.o.appendLocked(p)
}

// Adopt makes p the object's bytes, all of them, without copying: for
// an object of len(p) bytes with none written yet. The object keeps p,
// so the caller gives it up: nobody may write it again. An inline
// object's bytes arrive so, decoded in place in the buffer the data
// plane received them into (the one copy on this side).
func (w *Writer) Adopt(p []byte) error {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.o.size != int64(len(p)) || w.o.written != 0 {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: adopting %d bytes at %d of size %d", w.o.id, len(p), w.o.written, w.o.size)
	}
	w.o.buf = p[:len(p):len(p)]
	w.o.written = w.o.size
	w.o.lent = false
	w.o.broadcast()
	return nil
}

// Tail is the unwritten rest of the buffer, for a writer that computes in
// place (a reduce) or receives there (a transfer); Advance then publishes
// what it wrote. Its bytes are unspecified until written: write before
// reading.
func (w *Writer) Tail() ([]byte, error) {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if err := w.usable(); err != nil {
		return nil, err
	}
	if w.o.size < 0 {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q has no buffer yet", w.o.id)
	}
	w.o.lent = true
	return w.o.bufLocked()[w.o.written:w.o.size:w.o.size], nil
}

// Advance publishes n bytes written in place at the front of Tail.
func (w *Writer) Advance(n int) error {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if n < 0 || w.o.written+int64(n) > w.o.size {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: advance of %d at %d overflows size %d", w.o.id, n, w.o.written, w.o.size)
	}
	w.o.written += int64(n)
	w.o.lent = false
	w.o.broadcast()
	return nil
}

// Rewind discards what was written, even a complete object's (a Reduce
// position reduces again): readers that already took bytes get RESET and
// start over. Callers never rewind an object others may hold complete.
func (w *Writer) Rewind() error {
	w.o.mu.Lock()
	defer w.o.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	// A fresh buffer (made by the next write): slices handed to readers
	// before stay as they were (bytes below written are immutable), they
	// just stop being current.
	w.o.buf = nil
	w.o.written, w.o.done = 0, false
	w.o.epoch++
	w.o.broadcast()
	return nil
}

// Epoch is the number of times the object was rewound.
func (o *Object) Epoch() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.epoch
}

func (w *Writer) usable() error {
	if w.gen != w.o.writerGen {
		return messages.Errorf(messages.ErrorCode_CANCELED, "object %q: writer superseded", w.o.id)
	}
	return w.o.err
}

// bufLocked is the object's buffer, made on first use: the store charges
// an object's bytes when it is created and the first write allocates them
// (see Store.allocate); a rewind drops the buffer for the next write to
// make afresh. Callers hold o.mu and know the size.
//
// The buffer is not zeroed (bufalloc.Make): nothing reads past written,
// and every writer (an Append, a transfer into Tail, a reduce computing
// there) writes a byte before it Advances over it, so zeroing it first
// would only be one more pass over every byte a fetch receives.
func (o *Object) bufLocked() []byte {
	if o.buf == nil && o.size > 0 {
		o.buf = bufalloc.Make(int(o.size))
	}
	return o.buf
}

func (o *Object) appendLocked(p []byte) error {
	if o.err != nil {
		return o.err
	}
	if o.size < 0 || o.written+int64(len(p)) > o.size {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: write of %d bytes at %d overflows size %d", o.id, len(p), o.written, o.size)
	}
	// Copying under the lock is safe for readers (they only read below
	// written) and keeps the happens-before edge simple for the race
	// detector; a chunk copy is short.
	copy(o.bufLocked()[o.written:], p)
	o.written += int64(len(p))
	o.broadcast()
	return nil
}

// Finish marks a fully written object complete.
func (o *Object) Finish() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return o.err
	}
	if o.written != o.size {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q finished at %d of %d bytes", o.id, o.written, o.size)
	}
	o.done = true
	o.broadcast()
	return nil
}

// fail ends the object with err, waking every waiter. Callers hold o.mu.
func (o *Object) fail(err error) {
	if o.err == nil && !o.done {
		o.err = err
		o.broadcast()
	}
}

// dropped ends the object even if it was complete: readers must stop.
func (o *Object) dropped(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = err
		o.broadcast()
	}
}

// WaitComplete blocks until the object is complete, failed or ctx ends.
func (o *Object) WaitComplete(ctx context.Context) error {
	for {
		o.mu.Lock()
		done, err, ch := o.done, o.err, o.changed
		o.mu.Unlock()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return messages.AsError(ctx.Err())
		}
	}
}

// Bytes returns the whole buffer of a complete object, shared read-only.
func (o *Object) Bytes() ([]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return nil, o.err
	}
	if !o.done {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q is not complete", o.id)
	}
	return o.buf[:o.size:o.size], nil
}

// ReadAt returns up to max bytes at off, shared read-only, waiting until
// at least one byte past off has been written.
func (o *Object) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	return o.readAt(ctx, off, max, nil)
}

// readAt is ReadAt for a reader that began in epoch *epoch (nil: any).
func (o *Object) readAt(ctx context.Context, off int64, max int, epoch *uint64) ([]byte, error) {
	if off < 0 || max <= 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q: read of %d bytes at %d", o.id, max, off)
	}
	for {
		o.mu.Lock()
		size, written, err, ch := o.size, o.written, o.err, o.changed
		buf, cur := o.buf, o.epoch
		if o.held && !o.done && size > 0 {
			written = min(written, size-1) // see HoldTail
		}
		o.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if epoch != nil && *epoch != cur {
			return nil, messages.Errorf(messages.ErrorCode_RESET, "object %q was rewound", o.id)
		}
		if size >= 0 && off >= size {
			return nil, io.EOF
		}
		if written > off {
			end := min(written, off+int64(max))
			return buf[off:end:end], nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, messages.AsError(ctx.Err())
		}
	}
}

// WholeBytes returns the buffer if every byte of the object was written,
// even if it was dropped since: a Put asks whether its bytes were readable
// before a Delete reached them.
func (o *Object) WholeBytes() ([]byte, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.size < 0 || o.written != o.size {
		return nil, false
	}
	return o.buf[:o.size:o.size], true
}

// IsWhole reports whether every byte of the object was written.
func (o *Object) IsWhole() bool {
	_, ok := o.WholeBytes()
	return ok
}
