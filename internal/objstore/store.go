package objstore

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// Store is one node's local object store: the buffers, their progress,
// pinning and LRU eviction under a capacity. It lives outside the store
// node actor so that its contents survive the actor's restarts. It starts
// no goroutines and reads no clock (an object of 4 MiB or more that
// Remove drops has the allocator collect garbage in the background:
// bufalloc.Released); it is safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	objects  map[string]*Object
	lru      *list.List // evictable objects, most recently used at the front
	failed   error      // set by Fail: the node is gone
	// deleted remembers ids this node saw deleted, oldest at the front,
	// at most deletedLimit (as many as a directory shard remembers): a
	// shard that restarts or moves learns them back from the store nodes.
	deleted      *list.List
	deletedIdx   map[string]*list.Element
	deletedLimit int
	evictions    int64
	onEvict      func(id string) // see OnEvict
	// created is closed (and replaced) whenever an object is created: a
	// reader of a Reduce intermediate that is not here yet waits on it
	// (see OpenObject).
	created chan struct{}
}

// NewStore returns an empty store that holds at most capacity bytes.
func NewStore(capacity int64) *Store {
	return &Store{capacity: capacity, objects: map[string]*Object{}, lru: list.New(),
		deleted: list.New(), deletedIdx: map[string]*list.Element{}, deletedLimit: directory.DefaultTableConfig().TombstoneLimit}
}

// OnEvict sets f (nil: none) to be called with the id of each copy the
// store evicts to make room, as it evicts it, under the store's lock (f
// must not call the store). The chaos suites' history learns evictions
// from it: the copy's unpublication, sent to the object's directory
// shard, can be lost with the shard's host.
func (s *Store) OnEvict(f func(id string)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onEvict = f
}

// NoteDeleted remembers that id was deleted (this node issued the Delete,
// or the directory dropped its copy as deleted). It outlives the store
// node actor's restarts, like the objects.
func (s *Store) NoteDeleted(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil || s.deletedIdx[id] != nil {
		return
	}
	s.deletedIdx[id] = s.deleted.PushBack(id)
	for s.deleted.Len() > s.deletedLimit {
		delete(s.deletedIdx, s.deleted.Remove(s.deleted.Front()).(string))
	}
}

// ForgetDeleted forgets that id was deleted: the directory accepted it as
// a new object (its shard had forgotten the deletion).
func (s *Store) ForgetDeleted(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.deletedIdx[id]; e != nil {
		s.deleted.Remove(e)
		delete(s.deletedIdx, id)
	}
}

// DeletedIDs returns the remembered deleted ids, oldest first.
func (s *Store) DeletedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, s.deleted.Len())
	for e := s.deleted.Front(); e != nil; e = e.Next() {
		out = append(out, e.Value.(string))
	}
	return out
}

// Capacity is the store's size limit in bytes.
func (s *Store) Capacity() int64 { return s.capacity }

// Used is the number of bytes charged against the capacity.
func (s *Store) Used() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// Usage is a snapshot of the store's use: bytes of creator copies
// (pinned, never evicted before Delete) and of other copies (cached,
// evictable once idle), the object count and evictions so far.
type Usage struct {
	Pinned, Cached int64
	Objects        int
	Evictions      int64
	Capacity, Used int64
}

// Usage returns the store's use now.
func (s *Store) Usage() Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := Usage{Objects: len(s.objects), Evictions: s.evictions, Capacity: s.capacity, Used: s.used}
	for _, o := range s.objects { // s.mu, then o.mu: the order allocate uses
		if o.Pinned() {
			u.Pinned += max(o.Size(), 0)
		} else {
			u.Cached += max(o.Size(), 0)
		}
	}
	return u
}

// Lookup returns the object or nil, marking it recently used.
func (s *Store) Lookup(id string) *Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objects[id]
	if o != nil && o.lru != nil {
		s.lru.MoveToFront(o.lru)
	}
	return o
}

// Objects returns a snapshot of every object (for republishing and for
// resuming fetches after a restart).
func (s *Store) Objects() []*Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Object, 0, len(s.objects))
	for _, o := range s.objects {
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b *Object) int {
		if a.id < b.id {
			return -1
		}
		return 1
	})
	return out
}

// Create makes a pinned creator copy of size bytes. It evicts unpinned,
// idle, complete objects (least recently used first) to make room and
// returns their ids so the caller can unpublish them.
func (s *Store) Create(id string, size int64, fingerprint uint64) (*Object, []string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		// Fail-stop: a run still going on a dead node (a reduce worker
		// whose run outlived the failure) must not leave an object in the
		// cleared store.
		return nil, nil, messages.AsError(s.failed)
	}
	if s.objects[id] != nil {
		return nil, nil, messages.Errorf(messages.ErrorCode_CONFLICT, "object %q is already in this node's store", id)
	}
	evicted, err := s.makeRoom(id, size)
	if err != nil {
		return nil, nil, err
	}
	o := newObject(id, size, true)
	o.fingerprint = fingerprint
	s.allocate(o, size)
	s.objects[id] = o
	s.announceLocked()
	return o, evicted, nil
}

// announceLocked wakes the readers waiting for an object to be created.
// Callers hold s.mu.
func (s *Store) announceLocked() {
	if s.created != nil {
		close(s.created)
		s.created = nil
	}
}

// Reserve returns the object if the store has it, or a new placeholder of
// unknown size for a fetch that is about to start (created true).
func (s *Store) Reserve(id string) (o *Object, created bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := s.objects[id]; o != nil {
		if o.lru != nil {
			s.lru.MoveToFront(o.lru)
		}
		return o, false
	}
	o = newObject(id, -1, false)
	s.objects[id] = o
	return o, true
}

// Allocate gives a reserved placeholder its size and buffer, evicting as
// Create does. On error the placeholder is failed and removed.
func (s *Store) Allocate(o *Object, size int64, fingerprint uint64) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objects[o.id] != o {
		return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q was dropped", o.id)
	}
	// Once: a fetch superseded after it located the object (its store
	// node restarted) may still try, and a second buffer would wipe what
	// the newer fetch wrote and count the bytes twice.
	if have := o.Size(); have >= 0 {
		if have != size {
			return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: allocated with %d bytes, asked for %d", o.id, have, size)
		}
		return nil, nil
	}
	evicted, err := s.makeRoom(o.id, size)
	if err != nil {
		s.removeLocked(o, err)
		return nil, err
	}
	o.mu.Lock()
	o.fingerprint = fingerprint
	o.mu.Unlock()
	s.allocate(o, size)
	return evicted, nil
}

// Promote turns a placeholder that a Get left while still locating the
// object into this node's creator copy: a Put of the same id on this node
// fills it, and the Gets waiting on it get the Put's bytes.
func (s *Store) Promote(o *Object, size int64, fingerprint uint64) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.mu.Lock()
	placeholder := o.size < 0 && !o.pinned && o.err == nil
	o.mu.Unlock()
	if s.objects[o.id] != o || !placeholder {
		return nil, messages.Errorf(messages.ErrorCode_CONFLICT, "object %q is no longer a placeholder", o.id)
	}
	evicted, err := s.makeRoom(o.id, size)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	o.pinned, o.creator, o.fingerprint = true, true, fingerprint
	o.mu.Unlock()
	s.allocate(o, size)
	return evicted, nil
}

// Unpin makes a copy an ordinary (evictable) one: a Put that turned out
// to duplicate an object created elsewhere keeps its bytes as a copy.
func (s *Store) Unpin(o *Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.mu.Lock()
	o.pinned, o.creator = false, false
	o.mu.Unlock()
	s.refreshLRU(o)
}

// allocate gives o its size and charges it against the capacity. The
// buffer itself is made by the first write (see Object.bufLocked), not
// here under the store's lock: a node that starts a sliced AllReduce of
// 32 MiB at 8 creates 8 outputs of 4 MiB and a 32 MiB copy of the target
// at once, and zeroing those 64 MiB here, one after another under s.mu,
// held each member's last output back 22-67 ms after its task arrived
// (BenchmarkSlicedAllReduceStagger), while most of them are first written
// only when a predecessor's first chunk comes in.
func (s *Store) allocate(o *Object, size int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.size = size
	o.buf = nil
	o.accounted = size
	s.used += size
	if size == 0 {
		o.done = true
	}
	o.broadcast()
}

// makeRoom evicts just enough idle unpinned objects for size more bytes,
// or evicts nothing and fails. Callers hold s.mu.
func (s *Store) makeRoom(id string, size int64) ([]string, error) {
	if size < 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object %q: negative size %d", id, size)
	}
	if size > s.capacity {
		return nil, messages.Errorf(messages.ErrorCode_CAPACITY, "object %q of %d bytes exceeds the node capacity of %d bytes", id, size, s.capacity)
	}
	need := s.used + size - s.capacity
	if need <= 0 {
		return nil, nil
	}
	var victims []*Object
	for e := s.lru.Back(); e != nil && need > 0; e = e.Prev() {
		o := e.Value.(*Object)
		victims = append(victims, o)
		need -= o.accounted
	}
	if need > 0 {
		return nil, messages.Errorf(messages.ErrorCode_CAPACITY,
			"object %q of %d bytes does not fit: %d of %d bytes used by pinned or busy objects", id, size, s.used, s.capacity)
	}
	ids := make([]string, 0, len(victims))
	for _, o := range victims {
		s.removeLocked(o, &evictedError{err: messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q was evicted", o.id)})
		ids = append(ids, o.id)
		if s.onEvict != nil {
			s.onEvict(o.id)
		}
	}
	s.evictions += int64(len(ids))
	return ids, nil
}

// evictedError ends a copy that the store evicted to make room: NOT_FOUND
// here, but the object itself may be whole elsewhere (see Evicted).
type evictedError struct{ err *messages.Error }

func (e *evictedError) Error() string { return e.err.Error() }
func (e *evictedError) Unwrap() error { return e.err }

// Evicted reports whether err ended a copy because the store evicted it
// to make room. A Get waiting on that copy asks again rather than answer
// NOT_FOUND: the copy completed and went before the Get read it (a store
// full of cached copies), while the object exists.
func Evicted(err error) bool {
	var e *evictedError
	return errors.As(err, &e)
}

// Complete marks an object's copy finished and, if it is not pinned,
// makes it evictable.
func (s *Store) Complete(o *Object) error {
	if err := o.Finish(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshLRU(o)
	return nil
}

// CommitTarget completes the held copy of target id (Object.HoldTail)
// that generation gen of Reduce reduceID wrote whole, and reports whether
// it did: the Reduce's coordinator took that generation's result
// (messages.ReduceCommit). A copy another run produces, one still being
// written or rewound, or one dropped stays as it is.
func (s *Store) CommitTarget(id, reduceID string, gen int32, reduced []string) bool {
	o := s.Lookup(id)
	if o == nil {
		return false
	}
	o.mu.Lock()
	ok := o.heldWholeLocked() && o.producer == reduceID && o.producerGen == gen
	if ok {
		o.reduced = reduced
	}
	o.mu.Unlock()
	return ok && s.Complete(o) == nil
}

// refreshLRU puts o in or out of the eviction list. Callers hold s.mu.
func (s *Store) refreshLRU(o *Object) {
	if s.objects[o.id] != o {
		return
	}
	o.mu.Lock()
	evictable := o.done && !o.pinned && o.readers == 0 && o.err == nil
	o.mu.Unlock()
	switch {
	case evictable && o.lru == nil:
		o.lru = s.lru.PushFront(o)
	case !evictable && o.lru != nil:
		s.lru.Remove(o.lru)
		o.lru = nil
	}
}

// Clear drops every object (the node failed: its data is gone), failing
// waiters and readers with err.
func (s *Store) Clear(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.objects {
		s.removeLocked(o, err)
	}
}

// Fail clears the store for good: its node failed (fail-stop fault
// injection). Work still running on the node sees Failed and goes quiet,
// as a dead process would, instead of reporting errors peers would take
// for the node's verdict.
func (s *Store) Fail(err error) {
	s.mu.Lock()
	s.failed = err
	s.deleted.Init()
	clear(s.deletedIdx)
	s.announceLocked()
	s.mu.Unlock()
	s.Clear(err)
}

// Failed is the error Fail recorded, or nil.
func (s *Store) Failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed
}

// Remove drops the object, failing its waiters and readers with err.
// It reports whether the object was there.
func (s *Store) Remove(id string, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeDeleted(s.objects[id], err)
}

// RemoveObject is Remove of o alone: it drops o if it is still the
// store's copy of its id, and reports whether it was.
func (s *Store) RemoveObject(o *Object, err error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o == nil || s.objects[o.id] != o {
		return false
	}
	return s.removeDeleted(o, err)
}

// removeDeleted drops o (nil: nothing) for a Delete.
func (s *Store) removeDeleted(o *Object, err error) bool {
	if o == nil {
		return false
	}
	s.removeLocked(o, err)
	// A Delete: its memory is for the next object once nothing else
	// holds it. (Not a Reduce's outputs, which Abort drops while the
	// Reduce goes on: collections in the middle of a sliced AllReduce
	// cost more than the memory they freed saved.)
	bufalloc.Released(int(o.accounted))
	return true
}

// Abort fails o and drops it if it is still the store's copy of its id
// (complete or not: a Put that lost its directory registration must not
// leave a stale pinned copy).
func (s *Store) Abort(o *Object, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o.mu.Lock()
	o.fail(err)
	o.mu.Unlock()
	if s.objects[o.id] == o {
		s.removeLocked(o, err)
	}
}

func (s *Store) removeLocked(o *Object, err error) {
	delete(s.objects, o.id)
	if o.lru != nil {
		s.lru.Remove(o.lru)
		o.lru = nil
	}
	s.used -= o.accounted
	o.dropped(err)
}

// intermediateNotCreated is OpenObject's error for a Reduce intermediate
// its reader stopped waiting for (ctx ended) before this node's worker
// created it. The reader's deadline passing is a TIMEOUT, and any other
// end of its wait (its run stopped, its stream went) UNAVAILABLE, as
// from a node that failed: NOT_FOUND made a tree position fail its
// whole Reduce with NOT_FOUND though every id the caller named existed.
func intermediateNotCreated(ctx context.Context, id string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return messages.Errorf(messages.ErrorCode_TIMEOUT, "reduce intermediate %q was not created on this node before its reader's deadline", id)
	}
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce intermediate %q was not created on this node before its reader stopped waiting", id)
}

// OpenObject implements transport.Source: a reader that holds the object
// against eviction until it is closed. A receiver is announced as a
// partial location before it knows the object's size; opening it waits
// for that instead of failing. A Reduce intermediate (an internal id) that
// is not here yet is waited for too, until ctx ends: a parent's task goes
// out with its children's, and may reach its node first.
func (s *Store) OpenObject(ctx context.Context, id string) (transport.ObjectReader, error) {
	for {
		s.mu.Lock()
		o := s.objects[id]
		if o == nil {
			if s.failed != nil {
				// The node is gone (fail-stop): a reader still reaching
				// it must fail over as from a broken connection. NOT_FOUND
				// here made a reduce tree position fail its whole Reduce
				// when it read its child's output from a node killed a
				// moment before, ahead of the failure notice that repairs.
				s.mu.Unlock()
				return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q: this node failed", id)
			}
			if !strings.HasPrefix(id, directory.InternalPrefix) {
				s.mu.Unlock()
				return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on this node", id)
			}
			// A Reduce intermediate that this node's worker has not
			// created yet: its parent's task went out with it, and the
			// parent streams as soon as it exists.
			if s.created == nil {
				s.created = make(chan struct{})
			}
			ch := s.created
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, intermediateNotCreated(ctx, id)
			}
		}
		o.mu.Lock()
		size, err, ch := o.size, o.err, o.changed
		if err == nil && size >= 0 {
			o.readers++
		}
		o.mu.Unlock()
		if err == nil && size >= 0 {
			s.refreshLRU(o)
			s.mu.Unlock()
			return &objectReader{s: s, o: o, size: size, epoch: o.Epoch()}, nil
		}
		s.mu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "object %q: size still unknown at the deadline", id)
		}
	}
}

type objectReader struct {
	s      *Store
	o      *Object
	size   int64
	epoch  uint64 // the object's epoch when the reader opened it
	closed sync.Once
}

func (r *objectReader) Size() int64 { return r.size }

// ReadAt fails with RESET once the object was rewound after the reader
// opened it: the bytes it handed out before are no longer the object's.
func (r *objectReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	return r.o.readAt(ctx, off, max, &r.epoch)
}

func (r *objectReader) Close() {
	r.closed.Do(func() {
		r.o.mu.Lock()
		r.o.readers--
		r.o.mu.Unlock()
		r.s.mu.Lock()
		r.s.refreshLRU(r.o)
		r.s.mu.Unlock()
	})
}
