package storenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// fetchSession is the child actor of a store node that brings one object
// to this node. It is the shell of a FetchProtocol: Receive turns each
// message into one call of the protocol and drain turns the protocol's
// output into sends, one timer, watches and data-plane copies. Locates go
// out with ctx.Request, so the shard answers this actor directly; each
// copy runs on one goroutine that reports only its end.
//
// A session with into set fetches into a GetInto caller's buffer instead
// of the store (storenode.NewFetchIntoProtocol): it has no object, and it
// answers the caller when it ends, not its store node.
type fetchSession struct {
	cfg  *Config
	id   string
	obj  *storenode.Object
	into *intoJob
	// deadline is the Gets' latest deadline (unix nanos), kept by the
	// store node: a session restarted after a panic starts from it, not
	// from the first Get's.
	deadline *atomic.Int64
	p        *storenode.Fetch
	// shards are the shards asked, with the attempt last sent to each: a
	// watched shard that stops is an UNAVAILABLE answer at once.
	shards map[string]uint64
	// shardWatch is, per shard asked, the watch: a timer until it is due
	// (see watchDelay), then nil once the shard is watched.
	shardWatch map[string]*time.Timer
	// senders are the watched senders, by PID, with their node ids.
	senders map[string]string
	// timer is the protocol's one pending wait: a newer timer makes the
	// older one stale (the protocol would ignore it), so it is stopped.
	timer *time.Timer
	// cuts end the running copies, by stream id.
	cuts map[uint64]context.CancelFunc
	// calls end the Locates on the data plane still unanswered, by
	// attempt; lastByActor is set when the last Locate went as an actor
	// message (a session locates one object, at one shard at a time).
	calls       map[uint64]context.CancelFunc
	lastByActor bool
	// locators send the Locates by actor, one per shard, so that a
	// DeadLetterResponse names the shard that was not running.
	locators actorutil.Senders
	done     bool
	// adopt is the store node's own fetch this session takes over (see
	// lightFetch); a session restarted after a panic starts anew.
	adopt *adoption
}

// intoJob is the GetInto a session serves. It is kept by the session's
// producer, so that a session restarted after a panic knows it answered.
type intoJob struct {
	req     *storenode.GetIntoRequest
	caller  *actor.PID
	replied atomic.Bool
	// stopWatch ends the watch of the caller's context (callerGone).
	stopWatch func() bool
}

// callerGone: the GetInto's caller stopped waiting.
type callerGone struct{}

// intoLocal asks the store node to answer a GetInto from its own copy:
// the directory said this node holds the object.
type intoLocal struct {
	req    *storenode.GetIntoRequest
	caller *actor.PID
}

// fetchTimerFired hands a storenode.FetchTimer back to the session.
type fetchTimerFired struct{ t storenode.FetchTimer }

// streamEnded reports the end of one data-plane copy; upTo is how far a
// copy into a caller's buffer got.
type streamEnded struct {
	id   uint64
	upTo int64
	err  error
}

// extendFetch carries a later Get's deadline to the session.
type extendFetch struct{ deadline time.Time }

// watchShard: a Locate to the shard is still unanswered after
// watchDelay: watch the shard now.
type watchShard struct{ pid *actor.PID }

// watchDelay is how long a session waits for a Locate's answer before it
// watches the shard. Most Locates are answered well within it, and a
// remote watch is two more messages across the network per Get (Watch,
// and the Unwatch at the end), so the watch waits; a shard that stopped
// is then noticed this much later.
var watchDelay = 25 * time.Millisecond // a variable for the tests

// locateUnsent reports a Locate that could not be sent (no shard known)
// or, on the data plane, was not answered.
type locateUnsent struct {
	attempt uint64
	err     error
}

func newFetchProps(cfg *Config, obj *storenode.Object, deadline *atomic.Int64) *actor.Props {
	return actorutil.Props(func() actor.Actor {
		return &fetchSession{cfg: cfg, id: obj.ID(), obj: obj, deadline: deadline}
	})
}

// newFetchIntoProps is the session of one GetInto of an object this node
// does not hold, answering caller.
func newFetchIntoProps(cfg *Config, req *storenode.GetIntoRequest, caller *actor.PID) *actor.Props {
	job := &intoJob{req: req, caller: caller}
	return actorutil.Props(func() actor.Actor {
		return &fetchSession{cfg: cfg, id: req.ObjectID, into: job}
	})
}

func (f *fetchSession) Receive(ctx actor.Context) {
	now := time.Now()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if f.into != nil && f.into.replied.Load() {
			ctx.Stop(ctx.Self()) // restarted after it answered: nothing left to do
			return
		}
		f.drain(ctx, f.start(ctx, now))
	case *messages.LocateReply:
		f.callEnded(m.GetAttempt())
		f.drain(ctx, f.p.Located(m, now))
	case *locateUnsent:
		f.callEnded(m.attempt)
		f.drain(ctx, f.p.LocateFailed(m.attempt, m.err, now))
	case *fetchTimerFired:
		f.drain(ctx, f.p.Timer(m.t, now))
	case *streamEnded:
		f.endCopy(m.id)
		if f.into != nil {
			f.drain(ctx, f.p.IntoStreamEnded(m.id, m.upTo, m.err, now))
		} else {
			f.drain(ctx, f.p.StreamEnded(m.id, m.err, now))
		}
	case callerGone:
		if f.p != nil && f.into.replied.CompareAndSwap(false, true) {
			f.drain(ctx, f.p.Stop()) // nobody to answer: the caller returned
		}
	case *extendFetch:
		f.p.Extend(m.deadline)
	case watchShard:
		f.watchShard(ctx, m.pid)
	case *actor.Terminated:
		f.terminated(ctx, m.GetWho(), now)
	case *actor.DeadLetterResponse:
		// A Locate reached no shard (it stopped or moved): as Terminated.
		f.terminated(ctx, m.GetTarget(), now)
	case *actor.Stopping, *actor.Restarting:
		f.stopping(ctx)
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		f.cfg.Log.WithFields(logrus.Fields{"object": f.id, "type": fmt.Sprintf("%T", m)}).Warn("fetch session: unknown message dropped")
	}
}

// stopping ends this session's copy: a restarted session runs anew, and
// two would copy (the writer generation keeps their bytes apart
// regardless).
func (f *fetchSession) stopping(ctx actor.Context) {
	if f.p != nil && !f.done {
		// Not drained: the node that stops or restarts this session
		// needs no fetchEnded, and the protocol only cuts its copy.
		f.p.Stop()
		f.done = true
		// A GetInto's caller is answered now; its copy, cut below, may
		// still hold the buffer, and the caller waits for it to let go.
		f.answer(ctx, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the fetch of %q stopped with its store node (restarted or stopping)", f.id))
	}
	f.stopAll()
	f.unwatchAll(ctx)
	f.locators.Close()
}

// unwatchAll ends every watch of this session. An actor that stops does
// not unwatch what it watched, and a watched actor keeps its watchers
// until it stops itself: without this, a long-lived shard would keep the
// PID of every session that ever located an object through it.
func (f *fetchSession) unwatchAll(ctx actor.Context) {
	for key, t := range f.shardWatch {
		if t != nil {
			t.Stop()
		} else if pid := actorutil.PIDOfKey(key); pid != nil {
			ctx.Unwatch(pid)
		}
		delete(f.shardWatch, key)
	}
	for key := range f.senders {
		if pid := actorutil.PIDOfKey(key); pid != nil {
			ctx.Unwatch(pid)
		}
		delete(f.senders, key)
	}
}

// watchShard watches a shard whose Locate is still unanswered.
func (f *fetchSession) watchShard(ctx actor.Context, pid *actor.PID) {
	key := actorutil.Key(pid)
	if t, ok := f.shardWatch[key]; f.done || !ok || t == nil {
		return // over, or watched already
	}
	f.shardWatch[key] = nil
	ctx.Watch(pid)
}

func (f *fetchSession) start(ctx actor.Context, now time.Time) storenode.FetchOutput {
	f.shards, f.shardWatch, f.senders, f.cuts = map[string]uint64{}, map[string]*time.Timer{}, map[string]string{}, map[uint64]context.CancelFunc{}
	f.calls = map[uint64]context.CancelFunc{}
	if a := f.adopt; a != nil && a.taken.CompareAndSwap(false, true) {
		return f.adopted(ctx, a)
	}
	fc := fetchConfig(f.cfg, f.id)
	if j := f.into; j != nil {
		// The caller's deadline is final: it returns then, so no grace.
		fc.Grace = 0
		f.p = storenode.NewFetchInto(fc, f.id, j.req.Dst.Len(), j.req.Deadline, observer(f.cfg))
		system, self := ctx.ActorSystem(), ctx.Self()
		j.stopWatch = context.AfterFunc(j.req.Dst.Context(), func() { system.Root.Send(self, callerGone{}) })
		return f.p.Start(now)
	}
	f.p = storenode.NewFetch(fc, f.cfg.Store, f.obj, time.Unix(0, f.deadline.Load()), observer(f.cfg))
	return f.p.Start(now)
}

// fetchConfig is the protocol's configuration for a fetch of object id.
func fetchConfig(cfg *Config, id string) storenode.FetchConfig {
	seed := uint64(time.Now().UnixNano())
	return storenode.FetchConfig{Self: cfg.Self, Naive: cfg.Naive, Grace: cfg.StallTimeout,
		Rand: rand.New(rand.NewPCG(seed, seed>>32^uint64(len(id))))}
}

// observer takes the transfers a fetch measured (nil without an
// estimator).
func observer(cfg *Config) func(bytes int64, elapsed time.Duration) {
	if e := cfg.Estimator; e != nil {
		return e.ObserveTransfer
	}
	return nil
}

// terminated turns a watched actor's end into the protocol's input: a
// shard's into UNAVAILABLE for the Locate it had, a sender's into a
// sender failure.
func (f *fetchSession) terminated(ctx actor.Context, who *actor.PID, now time.Time) {
	key := actorutil.Key(who)
	if attempt, ok := f.shards[key]; ok {
		delete(f.shards, key)
		f.drain(ctx, f.p.LocateFailed(attempt, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s stopped", who.GetId()), now))
	}
	if node, ok := f.senders[key]; ok {
		delete(f.senders, key)
		f.cfg.Log.WithFields(logrus.Fields{"object": f.id, "sender": who.GetId()}).Info("sender terminated")
		f.drain(ctx, f.p.SenderFailed(node))
	}
}

// drain carries out one step's output.
func (f *fetchSession) drain(ctx actor.Context, out storenode.FetchOutput) {
	if f.done {
		return
	}
	id := f.id
	for _, s := range out.Sends {
		pid := f.resolve(s.To)
		if l, ok := s.Msg.(*messages.Locate); ok {
			if pid == nil {
				ctx.Send(ctx.Self(), &locateUnsent{attempt: l.GetAttempt(), err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no directory shard for %q", id)})
				continue
			}
			if _, ok := f.shardWatch[actorutil.Key(pid)]; !ok {
				system, self := ctx.ActorSystem(), ctx.Self()
				f.shardWatch[actorutil.Key(pid)] = time.AfterFunc(watchDelay, func() { system.Root.Send(self, watchShard{pid: pid}) })
			}
			f.shards[actorutil.Key(pid)] = l.GetAttempt()
			f.sendLocate(ctx, pid, l)
			continue
		}
		if _, ok := s.Msg.(*messages.CancelLocate); ok && pid != nil {
			f.cancelLocate(ctx, pid, s.Msg)
			continue
		}
		if pid != nil {
			ctx.Send(pid, s.Msg)
		}
	}
	for _, t := range out.Timers {
		f.arm(ctx, t.At, t.Msg.(storenode.FetchTimer))
	}
	if out.Cut != 0 {
		if cut := f.cuts[out.Cut]; cut != nil {
			cut()
		}
	}
	for _, w := range out.Unwatch {
		n, ok := w.(*messages.NodeRef)
		if !ok {
			continue
		}
		pid := n.PID()
		if _, ok := f.senders[actorutil.Key(pid)]; ok {
			delete(f.senders, actorutil.Key(pid))
			ctx.Unwatch(pid)
		}
	}
	for _, w := range out.Watch {
		if n, ok := w.(*messages.NodeRef); ok {
			pid := n.PID()
			f.senders[actorutil.Key(pid)] = n.GetNodeId()
			ctx.Watch(pid)
		}
	}
	for _, e := range out.Events {
		switch e := e.(type) {
		case *storenode.SenderFailure:
			f.cfg.Log.WithFields(logrus.Fields{"object": id, "sender": e.Sender.GetNodeId(),
				"offset": e.Offset, "error": e.Err}).Info("sender failed; locating another")
		default:
			ctx.ActorSystem().EventStream.Publish(e)
		}
	}
	if out.Stream != nil {
		f.startCopy(ctx, out.Stream)
	}
	if out.Done {
		f.done = true
		if out.Err != nil && !errors.Is(out.Err, messages.ErrCanceled) {
			f.cfg.Log.WithFields(logrus.Fields{"object": id, "error": out.Err}).Debug("fetch failed")
		}
		f.stopTimer()
		f.unwatchAll(ctx)
		f.locators.Close()
		if f.into != nil {
			f.answer(ctx, &out, out.Err)
		} else {
			ctx.Send(ctx.Parent(), &fetchEnded{id: id, pid: ctx.Self()})
		}
		ctx.Stop(ctx.Self())
	}
}

// answer ends a GetInto: with err, or as out says (the bytes are in the
// buffer, come inline, or are on this node, which its store node reads).
// Only the first answer goes out.
func (f *fetchSession) answer(ctx actor.Context, out *storenode.FetchOutput, err error) {
	j := f.into
	if j == nil {
		return
	}
	if j.stopWatch != nil {
		j.stopWatch()
	}
	if !j.replied.CompareAndSwap(false, true) {
		return
	}
	r := &storenode.GetIntoReply{ObjectID: f.id, Err: err}
	switch {
	case err != nil:
	case out.Local:
		ctx.Send(ctx.Parent(), &intoLocal{req: j.req, caller: j.caller})
		return
	case out.Inline != nil:
		r.N, r.Data = out.Size, out.Inline
	default:
		r.N = out.Size
	}
	ctx.Send(j.caller, r)
}

// sendLocate asks the shard at pid: on the data plane when its member
// has a data address (callLocate), else as an actor message.
func (f *fetchSession) sendLocate(ctx actor.Context, pid *actor.PID, l *messages.Locate) {
	caller := f.cfg.Transport
	addr := ""
	if f.cfg.LocateAt != nil && caller != nil {
		addr = f.cfg.LocateAt(pid)
	}
	f.lastByActor = addr == ""
	if f.lastByActor {
		f.locators.Request(ctx, pid, l)
		return
	}
	self := ctx.Self()
	replyTo := &messages.NodeRef{NodeId: f.cfg.Self.GetNodeId(), Address: self.GetAddress(), ActorId: self.GetId()}
	if cancel := callLocate(ctx.ActorSystem(), self, caller, addr, replyTo, l, sessionLocates{}); cancel != nil {
		f.calls[l.GetAttempt()] = cancel
	}
}

// sessionLocates tell a session of its Locates' ends: the answer, or why
// there is none; nothing when the answer is forwarded (it comes as an
// actor message).
type sessionLocates struct{}

func (sessionLocates) locateEnded(r locateEnd) any {
	switch {
	case r.forwarded:
		return nil
	case r.err != nil:
		return &locateUnsent{attempt: r.attempt, err: r.err}
	}
	return r.reply
}

// cancelLocate withdraws this session's waiting Locate at pid. One on the
// data plane is withdrawn by hanging up (the shard drops exactly that
// request); a CancelLocate message could arrive after this session's next
// Locate, which travels on another connection, and withdraw that instead.
func (f *fetchSession) cancelLocate(ctx actor.Context, pid *actor.PID, msg any) {
	f.endCalls()
	if f.lastByActor {
		ctx.Send(pid, msg)
	}
}

// callEnded forgets the data-plane Locate of attempt, answered or
// failed (its goroutine released its context), so that a long Get's
// retries keep no entry each.
func (f *fetchSession) callEnded(attempt uint64) {
	delete(f.calls, attempt)
}

// endCalls hangs up every Locate on the data plane still waiting.
func (f *fetchSession) endCalls() {
	for attempt, cancel := range f.calls {
		cancel()
		delete(f.calls, attempt)
	}
}

func (f *fetchSession) resolve(to any) *actor.PID {
	switch t := to.(type) {
	case directory.ShardOf:
		return f.cfg.ShardFor(string(t)) // may have moved since the last attempt
	case *messages.NodeRef:
		return t.PID()
	}
	return nil
}

// arm sets the one timer. time.AfterFunc rather than Proto.Actor's
// scheduler (whose cancel races with its timer goroutine): no goroutine
// runs until it fires, and then only to send one message.
func (f *fetchSession) arm(ctx actor.Context, at time.Time, t storenode.FetchTimer) {
	f.stopTimer()
	system, self := ctx.ActorSystem(), ctx.Self()
	f.timer = time.AfterFunc(time.Until(at), func() { system.Root.Send(self, &fetchTimerFired{t: t}) })
}

func (f *fetchSession) stopTimer() {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
}

func (f *fetchSession) stopAll() {
	f.stopTimer()
	f.endCalls()
	for id, cut := range f.cuts {
		cut()
		delete(f.cuts, id)
	}
}

// startCopy runs one data-plane copy on its own goroutine; it reports
// only its end (the object itself records the progress, which readers
// follow).
func (f *fetchSession) startCopy(ctx actor.Context, c *storenode.StreamCommand) {
	system, self := ctx.ActorSystem(), ctx.Self()
	// A broadcast tree's edge, as it forms and as it ends (the live view
	// draws them): two events per stream, none per chunk.
	receiver, sender := f.cfg.Self.GetNodeId(), c.Sender.GetNodeId()
	ended := func(err error) {
		system.EventStream.Publish(&events.TransferEnded{Object: f.id, Receiver: receiver, Sender: sender, Err: err, At: time.Now()})
	}
	size := c.Size
	w := f.p.Writer()
	if f.into == nil {
		size = w.Size()
	}
	system.EventStream.Publish(&events.TransferStarted{Object: f.id, Receiver: receiver, Sender: sender, Offset: c.Offset, Size: size, At: time.Now()})
	if f.into != nil {
		// Bound to the caller's wait as well: a caller that gives up
		// waits for this copy to let go of its buffer.
		sctx, cut := context.WithCancel(f.into.req.Dst.Context())
		f.cuts[c.ID] = cut
		chunk := f.cfg.streamChunk(c.Size)
		go func() {
			upTo, err := f.streamToBuffer(sctx, c.Sender, c.Offset, c.Size, chunk)
			ended(err)
			system.Root.Send(self, &streamEnded{id: c.ID, upTo: upTo, err: err})
		}()
		return
	}
	sctx, cut := context.WithCancel(context.Background())
	f.cuts[c.ID] = cut
	chunk := f.cfg.streamChunk(w.Size())
	go func() {
		err := f.stream(sctx, w, c.Sender, c.Offset, chunk)
		ended(err)
		system.Root.Send(self, &streamEnded{id: c.ID, err: err})
	}()
}

func (f *fetchSession) endCopy(id uint64) {
	if cut := f.cuts[id]; cut != nil {
		cut()
		delete(f.cuts, id)
	}
}

// samePID compares PIDs; protoactor's Equal dereferences a nil receiver.
func samePID(a, b *actor.PID) bool {
	return a != nil && b != nil && a.Equal(b)
}

// stream copies the object from sender, starting at off (what is
// already here). Every read is bounded by the stall timeout.
func (f *fetchSession) stream(ctx context.Context, w *storenode.Writer, sender *messages.NodeRef, off int64, chunk int) error {
	id := f.id
	octx, cancel := context.WithTimeout(ctx, f.cfg.StallTimeout)
	s, err := f.cfg.Transport.Open(octx, f.cfg.Self.GetDataAddress(), sender.GetDataAddress(), id, off, chunk)
	cancel()
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Size() != f.obj.Size() {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: sender has %d bytes, expected %d", id, s.Size(), f.obj.Size())
	}
	if is, ok := s.(transport.IntoStream); ok {
		return f.streamInto(ctx, w, is, off)
	}
	for {
		cctx, cancel := context.WithTimeout(ctx, f.cfg.StallTimeout)
		b, err := s.Next(cctx)
		cancel()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h := f.cfg.Hooks.BeforeFetchChunk; h != nil {
			h(f.cfg.Self.GetNodeId(), id, off)
		}
		if ctx.Err() != nil {
			return ctx.Err() // stopped: a chunk ready in memory does not check ctx
		}
		if err := w.Append(b); err != nil {
			return err
		}
		off += int64(len(b))
	}
}

// streamInto is stream for a transport that receives into the object's
// own buffer: each chunk lands where it belongs and is published by
// Advance, with no copy on this side (what lets a 1 GiB fetch keep up with
// a plain TCP read).
func (f *fetchSession) streamInto(ctx context.Context, w *storenode.Writer, s transport.IntoStream, off int64) error {
	id := f.id
	for {
		tail, err := w.Tail()
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, f.cfg.StallTimeout)
		n, err := s.NextInto(cctx, tail)
		cancel()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h := f.cfg.Hooks.BeforeFetchChunk; h != nil {
			h(f.cfg.Self.GetNodeId(), id, off)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := w.Advance(n); err != nil {
			return err
		}
		off += int64(n)
	}
}

// streamToBuffer copies the object (size bytes) from sender into the
// GetInto caller's buffer, from off (what earlier copies put there) on,
// and returns how far the buffer holds it. It holds the buffer
// throughout: no other goroutine writes it meanwhile, and the caller's
// GetInto returns only after it let go. On a transport that receives
// into the caller's memory each chunk is read from the socket straight
// into its place; otherwise each chunk is copied once. Nothing past size
// is written.
func (f *fetchSession) streamToBuffer(ctx context.Context, sender *messages.NodeRef, off, size int64, chunk int) (int64, error) {
	dst := f.into.req.Dst
	b, ok := dst.Hold()
	if !ok {
		return off, messages.Errorf(messages.ErrorCode_CANCELED, "GetInto of %q: the buffer is no longer lent (the caller returned)", f.id)
	}
	defer dst.Release()
	if size > int64(len(b)) || off < 0 || off > size {
		return off, messages.Errorf(messages.ErrorCode_INTERNAL, "GetInto of %q: bytes %d..%d of a buffer of %d", f.id, off, size, len(b))
	}
	b = b[:size:size]
	octx, cancel := context.WithTimeout(ctx, f.cfg.StallTimeout)
	s, err := f.cfg.Transport.Open(octx, f.cfg.Self.GetDataAddress(), sender.GetDataAddress(), f.id, off, chunk)
	cancel()
	if err != nil {
		return off, err
	}
	defer s.Close()
	if s.Size() != size {
		return off, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: sender has %d bytes, expected %d", f.id, s.Size(), size)
	}
	is, direct := s.(transport.IntoStream)
	for off < size {
		cctx, cancel := context.WithTimeout(ctx, f.cfg.StallTimeout)
		var n int
		if direct {
			n, err = is.NextInto(cctx, b[off:])
		} else {
			var p []byte
			if p, err = s.Next(cctx); err == nil {
				if int64(len(p)) > size-off {
					err = messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: a chunk of %d bytes at %d of %d", f.id, len(p), off, size)
				}
				n = copy(b[off:], p)
			}
		}
		cancel()
		if err == io.EOF {
			return off, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q: the stream from %s ended at %d of %d bytes", f.id, sender.GetNodeId(), off, size)
		}
		if err != nil {
			return off, err
		}
		if h := f.cfg.Hooks.BeforeFetchChunk; h != nil {
			h(f.cfg.Self.GetNodeId(), f.id, off)
		}
		if ctx.Err() != nil {
			return off, ctx.Err() // cut: a chunk ready in memory does not check ctx
		}
		off += int64(n)
	}
	return off, nil
}
