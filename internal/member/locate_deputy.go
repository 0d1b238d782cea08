package member

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Locate deputies spread a hot small object's Locates. In a cluster of
// many members every receiver of a broadcast asks the object's directory
// shard, one member: for an inline object of 1 KiB to 1,023 receivers
// that member's receive CPU and uplink are the broadcast's whole time
// (18 ms in the simulator, against MPI's 1.9 ms). With deputies, the
// members are split into groups (by a hash of their id), and a member
// sends its Locates of another member's shard to its group's deputy for
// that shard: the member after the shard's home in the sorted member
// list, by group. A deputy sends a Locate on alone when nothing else of
// its object is out from it. Those that come while one is out wait for
// its answer (at most probeWait): once an answer brought the object's
// bytes they go on together (later ones after the window) in one
// LocateBatch, which the home answers from its shard's published inline
// objects with the bytes once (shardactor.ServeLocateBatch); else each
// goes alone. What the home leaves (a streamed object's Locates, or past
// its uplink's budget) the deputy asks alone, as a Locate sent straight,
// and so, for deputyStreamedFor, every later Locate of that object.
// Every Locate still reaches the home after its receiver sent it, so an
// answer says what the shard held at a moment inside the Get: a Get that
// starts after a Delete completed is answered DELETED, as without
// deputies. (Answering the Locates that come while one is out with that
// one's answer would save the home more, and could hand a Get that
// started after a Delete the bytes of an answer the home sent before
// it.) A receiver whose deputy fails it (gone, of an older version, or
// the shard moved under it) asks the home straight, within the same
// deadline.

// deputyWindow is how long a deputy holds a Locate of an object the home
// answered with its bytes, when others of it are out, for more to go
// with it in one batch.
const deputyWindow = 200 * time.Microsecond

// deputyProbeWait is how long a deputy holds the Locates that come while
// an object's first is out, for its answer to say whether the object
// goes in batches (its bytes) or alone (a sender, or no answer yet: the
// object is not there). The simulator's 1,024 hosts need 1 ms: the
// first answers of a 1 KiB broadcast come back within it (at 0.5 ms its
// Locates went alone, 12.8 ms in all); an AllReduce's result, whose
// Locates wait for it at the shard, holds the first Locates that follow
// its probe for that long (see directory.DeputyMinMembers).
const deputyProbeWait = time.Millisecond

// deputyStreamedFor is how long a deputy sends an object's Locates on
// alone after the home left one of them to be asked alone.
const deputyStreamedFor = time.Second

// deputyBatchTimeout bounds a batch whose waiters gave no deadline.
const deputyBatchTimeout = 30 * time.Second

// deputyMaxObjects bounds the objects a deputy keeps state for: past it,
// the idle ones are forgotten.
const deputyMaxObjects = 4096

// locateDeputy is a member's side as a Locate deputy: the Locates it
// sends on, by the home's data address and object.
type locateDeputy struct {
	window, probeWait time.Duration
	// batch and alone reach a home on the data plane (CallLocateBatch,
	// CallLocate); tests replace them.
	batch func(ctx context.Context, addr string, ls []*messages.Locate) ([]*messages.LocateReply, []bool, error)
	alone func(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error)

	mu      sync.Mutex
	objects map[deputyKey]*deputyObject

	batches, batched, sentAlone atomic.Int64
}

type deputyKey struct{ addr, id string }

// deputyObject is what a deputy holds of one object's Locates.
type deputyObject struct {
	out   int // sent on and not answered
	queue []*deputyWaiter
	// inline: the home answered the object with its bytes (its Locates
	// that come while others are out go in batches). slow: an answer
	// that was to say so did not come within probeWait (the object is
	// not there yet, and its Locate waits at the shard): its Locates go
	// alone at once until one comes with the bytes.
	inline, slow bool
	streamed     time.Time // when the home last left one of its Locates to be asked alone
}

type deputyWaiter struct {
	l    *messages.Locate
	ctx  context.Context
	done chan deputyResult // buffered: flush never waits
}

type deputyResult struct {
	r      *messages.LocateReply
	direct bool
}

func newLocateDeputy(batch func(ctx context.Context, addr string, ls []*messages.Locate) ([]*messages.LocateReply, []bool, error),
	alone func(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error)) *locateDeputy {
	return &locateDeputy{window: deputyWindow, probeWait: deputyProbeWait, batch: batch, alone: alone, objects: map[deputyKey]*deputyObject{}}
}

// Locate sends l on to the home at addr, alone or in a batch, and
// returns its answer. ctx must have a deadline.
func (d *locateDeputy) Locate(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error) {
	key := deputyKey{addr, l.GetObjectId()}
	now := time.Now()
	d.mu.Lock()
	o := d.objects[key]
	if o == nil {
		d.forget(now)
		o = &deputyObject{}
		d.objects[key] = o
	}
	if now.Sub(o.streamed) < deputyStreamedFor || o.slow || (o.out == 0 && len(o.queue) == 0) {
		o.out++
		d.mu.Unlock()
		return d.sendAlone(ctx, key, o, l)
	}
	w := &deputyWaiter{l: l, ctx: ctx, done: make(chan deputyResult, 1)}
	o.queue = append(o.queue, w)
	switch {
	case len(o.queue) >= messages.MaxLocateBatch:
		d.flushQueue(key, o)
	case len(o.queue) == 1:
		// Once the home answered the object with its bytes, the Locates
		// that come while others are out wait the window for more to go
		// with them; before, they wait for that answer (at most
		// probeWait), to learn whether the object goes in batches.
		wait := d.probeWait
		if o.inline {
			wait = d.window
		}
		d.mu.Unlock()
		time.AfterFunc(wait, func() {
			d.mu.Lock()
			if d.objects[key] == o && len(o.queue) > 0 {
				if !o.inline {
					o.slow = true
				}
				d.flushQueue(key, o)
				return
			}
			d.mu.Unlock()
		})
	default:
		d.mu.Unlock()
	}
	select {
	case res := <-w.done:
		if res.direct {
			// (o may be forgotten by now, idle: then this counts on
			// nothing anyone reads.)
			d.mu.Lock()
			o.out++
			d.mu.Unlock()
			return d.sendAlone(ctx, key, o, l)
		}
		return res.r, nil
	case <-ctx.Done():
		// Out of the queue if still there: a Locate whose receiver left
		// is not sent on (the home would record a copy for it).
		d.mu.Lock()
		o.queue = slices.DeleteFunc(o.queue, func(x *deputyWaiter) bool { return x == w })
		d.mu.Unlock()
		if ctx.Err() == context.DeadlineExceeded {
			return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no answer through the Locate deputy before the deadline")
		}
		return nil, messages.AsError(ctx.Err())
	}
}

// flushQueue sends o's queued Locates on: in one batch once the home
// answered the object with its bytes (and has not left one of its
// Locates since), else each alone, by its own waiter. Called under d.mu,
// which it releases.
func (d *locateDeputy) flushQueue(key deputyKey, o *deputyObject) {
	q := o.queue
	o.queue = nil
	if o.inline && time.Since(o.streamed) >= deputyStreamedFor {
		o.out += len(q)
		d.mu.Unlock()
		go d.flush(key, o, q)
		return
	}
	d.mu.Unlock()
	for _, w := range q {
		w.done <- deputyResult{direct: true}
	}
}

// sendAlone sends l on to the home by itself; an answer that names a
// sender (a streamed object) has the object's later Locates sent so too.
func (d *locateDeputy) sendAlone(ctx context.Context, key deputyKey, o *deputyObject, l *messages.Locate) (*messages.LocateReply, error) {
	d.sentAlone.Add(1)
	r, err := d.alone(ctx, key.addr, l)
	d.mu.Lock()
	o.out--
	decided := false
	if err == nil && r.GetError() == nil {
		if r.GetHasInline() {
			o.inline, o.slow = true, false
		} else {
			o.streamed = time.Now()
		}
		decided = true
	}
	if decided && len(o.queue) > 0 && d.objects[key] == o {
		d.flushQueue(key, o) // the Locates that waited for this answer
	} else {
		d.mu.Unlock()
	}
	return r, err
}

// flush sends the batch q on to the home at key.addr, within the latest
// of its waiters' deadlines, and hands each waiter its answer, or has it
// ask alone: a Locate the home left, or every one of a batch that failed
// (a home of an older version does not know batches, one whose shard
// moved refuses them; the Locate alone gets the home's own answer).
func (d *locateDeputy) flush(key deputyKey, o *deputyObject, q []*deputyWaiter) {
	var deadline time.Time
	ls := make([]*messages.Locate, len(q))
	for i, w := range q {
		ls[i] = w.l
		if dl, ok := w.ctx.Deadline(); ok && dl.After(deadline) {
			deadline = dl
		}
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(deputyBatchTimeout) // callers without a deadline (the contract asks one)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	d.batches.Add(1)
	d.batched.Add(int64(len(q)))
	replies, direct, err := d.batch(ctx, key.addr, ls)
	now := time.Now()
	d.mu.Lock()
	o.out -= len(q)
	if err != nil || slices.Contains(direct, true) {
		o.streamed = now
	}
	d.mu.Unlock()
	for i, w := range q {
		if err != nil || direct[i] {
			w.done <- deputyResult{direct: true}
			continue
		}
		w.done <- deputyResult{r: replies[i]}
	}
}

// forget drops the state of idle objects once there is too much of it.
// Under d.mu.
func (d *locateDeputy) forget(now time.Time) {
	if len(d.objects) < deputyMaxObjects {
		return
	}
	for k, o := range d.objects {
		if o.out == 0 && len(o.queue) == 0 && now.Sub(o.streamed) >= deputyStreamedFor {
			delete(d.objects, k)
		}
	}
}
