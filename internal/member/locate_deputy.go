package member

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/locatedeputy"
	"github.com/hoplite-go/hoplite/messages"
)

// Locate deputies spread a hot small object's Locates. In a cluster of
// many members every receiver of a broadcast asks the object's directory
// shard, one member: for an inline object of 1 KiB to 1,023 receivers
// that member's receive CPU and uplink are the broadcast's whole time
// (18 ms in the simulator, against MPI's 1.9 ms). With deputies, the
// members are split into groups (by a hash of their id), and a member
// sends its Locates of another member's shard to its group's deputy for
// that shard (locate_via.go). The deputy sends them on to the shard's
// member alone or in a LocateBatch, which the home answers from its
// shard's published inline objects with the bytes once
// (shardactor.ServeLocateBatch), as package locatedeputy's rule says;
// what the home leaves it asks alone, as a Locate sent straight. Every
// Locate still reaches the home after its receiver sent it, so an answer
// says what the shard held at a moment inside the Get: a Get that starts
// after a Delete completed is answered DELETED, as without deputies.
// (Answering the Locates that come while one is out with that one's
// answer would save the home more, and could hand a Get that started
// after a Delete the bytes of an answer the home sent before it.) A
// receiver whose deputy fails it (gone, of an older version, or the
// shard moved under it) asks the home straight, within the same
// deadline.

// deputyBatchTimeout bounds a batch whose waiters gave no deadline.
const deputyBatchTimeout = 30 * time.Second

// deputyMaxObjects bounds the objects a deputy keeps state for: past it,
// the idle ones are forgotten.
const deputyMaxObjects = 4096

// locateDeputy is a member's side as a Locate deputy: the Locates it
// sends on, by the home's data address and object, as the rule of
// package locatedeputy says.
type locateDeputy struct {
	// window and probeWait are the rule's waits (tests stretch them).
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

// deputyObject is what a deputy holds of one object's Locates: the
// rule's state, and the Locates it queued.
type deputyObject struct {
	rule  locatedeputy.Object
	queue []*deputyWaiter
}

type deputyWaiter struct {
	l    *messages.Locate
	ctx  context.Context
	done chan deputyResult // buffered: flush never waits
}

// deputyResult is a queued Locate's answer, or direct: send it alone.
type deputyResult struct {
	r      *messages.LocateReply
	direct bool
}

func newLocateDeputy(batch func(ctx context.Context, addr string, ls []*messages.Locate) ([]*messages.LocateReply, []bool, error),
	alone func(ctx context.Context, addr string, l *messages.Locate) (*messages.LocateReply, error)) *locateDeputy {
	return &locateDeputy{window: locatedeputy.Window, probeWait: locatedeputy.ProbeWait, batch: batch, alone: alone,
		objects: map[deputyKey]*deputyObject{}}
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
	alone, wait, flush := o.rule.Arrive(now)
	if alone {
		d.mu.Unlock()
		return d.sendAlone(ctx, key, o, l)
	}
	w := &deputyWaiter{l: l, ctx: ctx, done: make(chan deputyResult, 1)}
	o.queue = append(o.queue, w)
	switch {
	case flush:
		d.flushQueue(key, o)
	case wait != locatedeputy.NoWait:
		after := d.window
		if wait == locatedeputy.WaitProbe {
			after = d.probeWait
		}
		d.mu.Unlock()
		time.AfterFunc(after, func() {
			d.mu.Lock()
			if d.objects[key] == o && len(o.queue) > 0 {
				o.rule.TimerFired()
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
			o.rule.SentAlone()
			d.mu.Unlock()
			return d.sendAlone(ctx, key, o, l)
		}
		return res.r, nil
	case <-ctx.Done():
		// Out of the queue if still there: a Locate whose receiver left
		// is not sent on (the home would record a copy for it).
		d.mu.Lock()
		if i := slices.Index(o.queue, w); i >= 0 {
			o.queue = slices.Delete(o.queue, i, i+1)
			o.rule.Leave()
		}
		d.mu.Unlock()
		if ctx.Err() == context.DeadlineExceeded {
			return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no answer through the Locate deputy before the deadline")
		}
		return nil, messages.AsError(ctx.Err())
	}
}

// flushQueue sends o's queued Locates on, in one batch or each alone by
// its own waiter, as the rule says. Called under d.mu, which it releases.
func (d *locateDeputy) flushQueue(key deputyKey, o *deputyObject) {
	_, batch := o.rule.Flush(time.Now())
	q := o.queue
	o.queue = nil
	d.mu.Unlock()
	if batch {
		go d.flush(key, o, q)
		return
	}
	for _, w := range q {
		w.done <- deputyResult{direct: true}
	}
}

// sendAlone sends l on to the home by itself, and tells the rule what
// the answer says of the object; the Locates that waited for it go now
// if it decided how.
func (d *locateDeputy) sendAlone(ctx context.Context, key deputyKey, o *deputyObject, l *messages.Locate) (*messages.LocateReply, error) {
	d.sentAlone.Add(1)
	r, err := d.alone(ctx, key.addr, l)
	d.mu.Lock()
	if o.rule.AloneAnswered(time.Now(), r, err == nil) && d.objects[key] == o && len(o.queue) > 0 {
		d.flushQueue(key, o)
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
	d.mu.Lock()
	o.rule.BatchAnswered(time.Now(), len(q), err != nil || slices.Contains(direct, true))
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
		if o.rule.Idle(now) && len(o.queue) == 0 {
			delete(d.objects, k)
		}
	}
}
