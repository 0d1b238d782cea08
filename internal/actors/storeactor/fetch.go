package storeactor

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/fetchrun"
	"github.com/hoplite-go/hoplite/internal/getinto"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// fetchRun is one fetch the store node runs: a fetchrun.Fetch (the step
// machine) and what the node holds for it, from the Get that starts it to
// its end, inline or streamed. The store node is its one shell: each
// message about the fetch (its Locate's end, a timer, a copy's end, a
// watched peer's end) becomes one call of the protocol, and drain carries
// out the output (sends, one timer, the Locate call, data-plane copies).
// No other actor takes a fetch over, so a small Get costs no spawn, and
// a Locate's answer has one place to go.
//
// A run with into set fetches into a GetInto caller's buffer instead of
// the store (fetchrun.NewFetchInto): it has no object, and it answers
// the caller when it ends. Such runs are not in StoreNode.fetches (they
// are no fetch of the node's copy; several may run for one object).
//
// A run lives in one incarnation of the actor: a restart stops it (done),
// and the restarted node resumes the copies in the store anew (resume).
// Every message about a run names it, so one for a run that ended is
// dropped.
type fetchRun struct {
	id   string
	p    *fetchrun.Fetch
	obj  *objstore.Object // nil for a fetch into a caller's buffer
	into *intoJob
	// shard and attempt are the Locate the run waits for; cancel hangs
	// its call up (nil once it ended). watchDue watches a shard on
	// another member if that Locate is still unanswered after
	// actorutil.RemoteWatchDelay: watched at the Locate, each of a new
	// cluster's first Gets paid a remote watch for every shard its node
	// had not asked yet, on the Get's own path. A shard on this member
	// is watched at once.
	shard    *actor.PID
	attempt  uint64
	cancel   context.CancelFunc
	watchDue *time.Timer
	// senders are the nodes the run streams from, by PID key, with their
	// node ids: the node watches them, and their end is a sender failure.
	senders map[string]string
	// timer is the protocol's one pending wait.
	timer shell.Timer
	// cuts end the running copies, by stream id.
	cuts map[uint64]context.CancelFunc
	done bool
	// span traces the run (a no-op span when tracing is off): its
	// Locates carry it, and each stream is its child.
	span trace.Span
}

// intoJob is the GetInto a run serves.
type intoJob struct {
	req     *getinto.Request
	caller  *actor.PID
	replied bool
	// stopWatch ends the watch of the caller's context (fetchCallerGone).
	stopWatch func() bool
}

// fetchLocated is the end of a run's Locate: the shard's answer, or why
// there is none. It is the one way a Locate's answer comes back.
type fetchLocated struct {
	run     *fetchRun
	attempt uint64
	reply   *messages.LocateReply
	err     error
}

// fetchTimerFired hands a storeproto.FetchTimer back to its run.
type fetchTimerFired struct {
	run *fetchRun
	t   storeproto.FetchTimer
}

// fetchStreamEnded reports the end of one data-plane copy; upTo is how
// far a copy into a caller's buffer got.
type fetchStreamEnded struct {
	run  *fetchRun
	id   uint64
	upTo int64
	err  error
}

// fetchCallerGone: a GetInto's caller stopped waiting.
type fetchCallerGone struct{ run *fetchRun }

// fetchWatchDue: a run's Locate to a shard on another member is still
// unanswered after actorutil.RemoteWatchDelay.
type fetchWatchDue struct {
	run     *fetchRun
	attempt uint64
}

// startFetch starts the fetch of obj, which Reserve just created, for
// Gets until deadline.
func (n *StoreNode) startFetch(ctx actor.Context, obj *objstore.Object, deadline time.Time, traceParent string) {
	id := obj.ID()
	run := &fetchRun{id: id, obj: obj}
	_, run.span = tracing.Start(traceParent, tracing.Fetch)
	if run.span.IsRecording() { // attributes cost allocations: only when traced
		run.span.SetAttributes(attribute.String("hoplite.object", id), attribute.String("hoplite.node", n.cfg.Self.GetNodeId()))
	}
	run.p = fetchrun.NewFetch(fetchConfig(n.cfg, id), n.cfg.Store, obj, deadline, observer(n.cfg))
	n.fetches[id] = run
	n.fetchStep(ctx, run, storeproto.FetchStart{})
}

// startInto starts the fetch of a GetInto of an object this node does
// not hold, into the caller's buffer.
func (n *StoreNode) startInto(ctx actor.Context, req *getinto.Request, caller *actor.PID) {
	fc := fetchConfig(n.cfg, req.ObjectID)
	// The caller's deadline is final: it returns then, so no grace.
	fc.Grace = 0
	run := &fetchRun{id: req.ObjectID, into: &intoJob{req: req, caller: caller}}
	_, run.span = tracing.Start(tracing.Parent(req.Dst.Context()), tracing.Fetch)
	if run.span.IsRecording() {
		run.span.SetAttributes(attribute.String("hoplite.object", req.ObjectID),
			attribute.String("hoplite.node", n.cfg.Self.GetNodeId()), attribute.Bool("hoplite.into_caller_buffer", true))
	}
	run.p = fetchrun.NewFetchInto(fc, req.ObjectID, req.Dst.Len(), req.Deadline, observer(n.cfg))
	n.intos[run] = struct{}{}
	system, self := ctx.ActorSystem(), ctx.Self()
	run.into.stopWatch = context.AfterFunc(req.Dst.Context(), func() { system.Root.Send(self, &fetchCallerGone{run: run}) })
	n.fetchStep(ctx, run, storeproto.FetchStart{})
}

// fetchConfig is the protocol's configuration for a fetch of object id.
// Its attempts start at a random number: a Locate's answer names its
// attempt, which then cannot meet another fetch's of the same object.
func fetchConfig(cfg *Config, id string) storeproto.FetchConfig {
	seed := uint64(time.Now().UnixNano())
	r := rand.New(rand.NewPCG(seed, seed>>32^uint64(len(id))))
	return storeproto.FetchConfig{Self: cfg.Self, Grace: cfg.stall(),
		Rand: r, FirstAttempt: r.Uint64() &^ (1<<32 - 1)}
}

// observer takes the transfers a fetch measured (nil without an
// estimator).
func observer(cfg *Config) func(bytes int64, elapsed time.Duration) {
	if e := cfg.Estimator; e != nil {
		return e.ObserveTransfer
	}
	return nil
}

// fetchLocated takes the end of a run's Locate.
func (n *StoreNode) fetchLocated(ctx actor.Context, m *fetchLocated) {
	run := m.run
	if run.done {
		return
	}
	if m.attempt == run.attempt {
		run.cancel = nil // the call ended and released its context
		run.stopWatchDue()
	}
	if m.err != nil {
		n.fetchStep(ctx, run, storeproto.FetchLocateFailed{Attempt: m.attempt, Err: m.err})
		return
	}
	n.fetchStep(ctx, run, m.reply) // FetchLocated's unboxed form
}

// fetchWatchDue watches the shard of a run whose Locate is late.
func (n *StoreNode) fetchWatchDue(ctx actor.Context, m *fetchWatchDue) {
	if run := m.run; !run.done && run.cancel != nil && run.attempt == m.attempt && run.shard != nil {
		n.watch(ctx, run.shard)
	}
}

func (n *StoreNode) fetchTimerFired(ctx actor.Context, m *fetchTimerFired) {
	if !m.run.done {
		n.fetchStep(ctx, m.run, m.t)
	}
}

func (n *StoreNode) fetchStreamEnded(ctx actor.Context, m *fetchStreamEnded) {
	run := m.run
	if run.done {
		return
	}
	run.endCopy(m.id)
	if run.into != nil {
		n.fetchStep(ctx, run, storeproto.FetchIntoStreamEnded{Stream: m.id, UpTo: m.upTo, Err: m.err})
	} else {
		n.fetchStep(ctx, run, storeproto.FetchStreamEnded{Stream: m.id, Err: m.err})
	}
}

func (n *StoreNode) fetchCallerGone(ctx actor.Context, m *fetchCallerGone) {
	if run := m.run; !run.done && !run.into.replied {
		run.into.replied = true                       // nobody to answer: the caller returned
		n.fetchStep(ctx, run, storeproto.FetchStop{}) // cuts its copy
	}
}

// fetchPeerGone turns a watched actor's end into the runs' input: a
// shard's into UNAVAILABLE for the Locate it had, a sender's into a
// sender failure.
func (n *StoreNode) fetchPeerGone(ctx actor.Context, who *actor.PID) {
	key := actorutil.Key(who)
	each := func(run *fetchRun) {
		if run.done {
			return
		}
		if run.cancel != nil && actorutil.Key(run.shard) == key {
			run.hangUp()
			n.fetchStep(ctx, run, storeproto.FetchLocateFailed{Attempt: run.attempt, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s stopped", who.GetId())})
		}
		if node, ok := run.senders[key]; ok && !run.done {
			delete(run.senders, key)
			n.cfg.Log.WithFields(logrus.Fields{"object": run.id, "sender": membername.Actor(who)}).Info("sender terminated")
			n.fetchStep(ctx, run, storeproto.FetchSenderFailed{Node: node})
		}
	}
	for _, run := range n.fetches {
		each(run)
	}
	for run := range n.intos {
		each(run)
	}
}

// fetchDropped ends the run of obj, a copy the directory dropped (the
// store removed it): its Locate's answer may still come, and must find
// nothing to act on. The shard sends the drop after that answer, but the
// two travel different ways; both end here, in this actor.
func (n *StoreNode) fetchDropped(ctx actor.Context, obj *objstore.Object) {
	if run := n.fetches[obj.ID()]; run != nil && run.obj == obj {
		n.fetchStep(ctx, run, storeproto.FetchDropped{})
	}
}

// newFetchDriver wires the generic driver to the fetch protocol (the
// run's fetchrun.Fetch, which fills in the store's state): a Locate
// goes through the Locator and a CancelLocate hangs its call up, other
// sends go to the shard or node they name; a timer comes back as a
// fetchTimerFired of its run; the senders a run streams from are
// watched by the node (once), and their end is the run's sender
// failure.
func (n *StoreNode) newFetchDriver() *shell.Driver[*fetchRun, any, storeproto.FetchOutput] {
	return &shell.Driver[*fetchRun, any, storeproto.FetchOutput]{Carrier: shell.Carrier[*fetchRun]{
		Resolve: n.resolve,
		Route: func(ctx actor.Context, run *fetchRun, s outbox.Send) bool {
			switch m := s.Msg.(type) {
			case *messages.Locate:
				n.locate(ctx, run, s.To, m)
				return true
			case *messages.CancelLocate:
				// A Locate is withdrawn by hanging its call up: the shard
				// drops exactly that request, where a CancelLocate message
				// could overtake the run's next Locate and withdraw that.
				run.hangUp()
				return true
			}
			return false
		},
		Timer: func(ctx actor.Context, run *fetchRun, t outbox.Timer) {
			system, self, ft := ctx.ActorSystem(), ctx.Self(), t.Msg.(storeproto.FetchTimer)
			run.timer.Func(t.At, func() { system.Root.Send(self, &fetchTimerFired{run: run, t: ft}) })
		},
		Watch: func(ctx actor.Context, run *fetchRun, who any) {
			if ref, ok := who.(*messages.NodeRef); ok {
				pid := ref.PID()
				if run.senders == nil {
					run.senders = map[string]string{}
				}
				run.senders[actorutil.Key(pid)] = ref.GetNodeId()
				n.watch(ctx, pid)
			}
		},
		Unwatch: func(_ actor.Context, run *fetchRun, who any) {
			if ref, ok := who.(*messages.NodeRef); ok {
				delete(run.senders, actorutil.Key(ref.PID()))
			}
		},
		Event: func(ctx actor.Context, run *fetchRun, e any) {
			if f, ok := e.(*storeproto.SenderFailure); ok {
				n.cfg.Log.WithFields(logrus.Fields{"object": run.id, "sender": f.Sender.GetNodeId(),
					"offset": f.Offset, "error": f.Err}).Info("sender failed; locating another")
				return
			}
			ctx.ActorSystem().EventStream.Publish(e)
		},
	}}
}

// fetchStep steps run's fetch with ev on fetchDrive, then acts on what
// is the fetch's own (fetched). A run already ended steps its fetch and
// carries out nothing.
func (n *StoreNode) fetchStep(ctx actor.Context, run *fetchRun, ev any) {
	if run.done {
		run.p.Step(time.Now(), ev)
		return
	}
	out, _ := n.fetchDrive.Step(ctx, run, run.p, ev)
	n.fetched(ctx, run, out)
}

// drain carries out an output stepped elsewhere (a fast Get's, on the
// caller's goroutine): its Box through the driver's Carrier, then what
// is the fetch's own.
func (n *StoreNode) drain(ctx actor.Context, run *fetchRun, out storeproto.FetchOutput) {
	if run.done {
		return
	}
	n.fetchDrive.Carry(ctx, run, out.Box, nil)
	n.fetched(ctx, run, out)
}

// fetched acts on what is a fetch step's own, after its Box was carried
// out: a copy to cut or start, the end.
func (n *StoreNode) fetched(ctx actor.Context, run *fetchRun, out storeproto.FetchOutput) {
	if out.Cut != 0 {
		if cut := run.cuts[out.Cut]; cut != nil {
			cut()
		}
	}
	if out.Stream != nil {
		n.startCopy(ctx, run, out.Stream)
	}
	if out.Done {
		if out.Err != nil && !errors.Is(out.Err, messages.ErrCanceled) {
			n.cfg.Log.WithFields(logrus.Fields{"object": run.id, "error": out.Err}).Debug("fetch failed")
		}
		n.endRun(run, out.Err)
		if run.into != nil {
			n.answerInto(ctx, run, &out, out.Err)
		}
	}
}

// locate sends a run's Locate to the object's shard, the one way every
// Locate goes: the node's Locator, called on a pooled worker, whose end
// comes back as a fetchLocated. The node watches the shard (once: a
// node asks a bounded set of shards), so a shard that stops with the
// Locate in its mailbox fails it: a shard on this member at once, one on
// another member once the Locate is late (actorutil.RemoteWatchDelay).
func (n *StoreNode) locate(ctx actor.Context, run *fetchRun, to any, l *messages.Locate) {
	run.hangUp() // a run has one Locate at a time
	run.attempt = l.GetAttempt()
	shard := n.resolve(to)
	if shard == nil {
		ctx.Send(ctx.Self(), &fetchLocated{run: run, attempt: run.attempt,
			err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no directory shard for %q", run.id)})
		return
	}
	run.shard = shard
	if tp := tracing.ParentOf(run.span); tp != "" {
		l = proto.CloneOf(l) // the protocol's message stays as it made it
		l.TraceParent = tp
	}
	run.watchDue = n.watchWhenLate(ctx, shard, &fetchWatchDue{run: run, attempt: run.attempt})
	run.cancel = callLocate(ctx.ActorSystem(), ctx.Self(), n.locator, shard, l, run)
}

// hangUp ends the run's Locate call, if one is waiting.
func (r *fetchRun) hangUp() {
	if r.cancel != nil {
		r.cancel()
		r.cancel = nil
	}
	r.stopWatchDue()
}

func (r *fetchRun) stopWatchDue() {
	if r.watchDue != nil {
		r.watchDue.Stop()
		r.watchDue = nil
	}
}

// answerInto ends a GetInto: with err, or as out says (the bytes are in
// the buffer, came inline, or are on this node, which is read from the
// store). Only the first answer goes out.
func (n *StoreNode) answerInto(ctx actor.Context, run *fetchRun, out *storeproto.FetchOutput, err error) {
	j := run.into
	if j.stopWatch != nil {
		j.stopWatch()
	}
	if j.replied {
		return
	}
	j.replied = true
	r := &getinto.Reply{ObjectID: run.id, Err: err}
	switch {
	case err != nil:
	case out.Local:
		n.getIntoLocal(ctx, j.req, j.caller)
		return
	case out.Inline != nil:
		r.N, r.Data = out.Size, out.Inline
	default:
		r.N = out.Size
	}
	ctx.Send(j.caller, r)
}

// endRun forgets a run that ended and releases what it holds.
func (n *StoreNode) endRun(run *fetchRun, err error) {
	run.done = true
	tracing.End(run.span, err)
	run.stopAll()
	if run.into != nil {
		delete(n.intos, run)
	} else if n.fetches[run.id] == run {
		delete(n.fetches, run.id)
	}
}

// stopFetches ends every run: this actor stops or restarts. The bytes
// stay in the store, where a restarted node resumes them; a GetInto's
// caller is answered now (its copy, cut here, may still hold the buffer,
// and the caller waits for it to let go).
// errFetchStopped ends the span of a run its store node stopped.
var errFetchStopped = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the fetch stopped with its store node")

func (n *StoreNode) stopFetches(ctx actor.Context) {
	for _, run := range n.fetches {
		run.p.Stop()
		n.endRun(run, errFetchStopped)
	}
	for run := range n.intos {
		run.p.Stop()
		n.endRun(run, errFetchStopped)
		n.answerInto(ctx, run, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the fetch of %q stopped with its store node (restarted or stopping)", run.id))
	}
}

func (n *StoreNode) resolve(to any) *actor.PID {
	switch t := to.(type) {
	case directory.ShardOf:
		return n.cfg.ShardFor(string(t)) // may have moved since the last attempt
	case *messages.NodeRef:
		return t.PID()
	}
	return nil
}

func (r *fetchRun) stopAll() {
	r.timer.Stop()
	r.hangUp()
	for id, cut := range r.cuts {
		cut()
		delete(r.cuts, id)
	}
}

func (r *fetchRun) endCopy(id uint64) {
	if cut := r.cuts[id]; cut != nil {
		cut()
		delete(r.cuts, id)
	}
}

// startCopy runs one data-plane copy on its own goroutine; it reports
// only its end (the object itself records the progress, which readers
// follow).
func (n *StoreNode) startCopy(ctx actor.Context, run *fetchRun, c *storeproto.StreamCommand) {
	cfg := n.cfg
	system, self := ctx.ActorSystem(), ctx.Self()
	// A broadcast tree's edge, as it forms and as it ends (the live view
	// draws them): two events per stream, none per chunk.
	receiver, sender, id := cfg.Self.GetNodeId(), c.Sender.GetNodeId(), run.id
	span := tracing.Child(run.span, tracing.Transfer)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("hoplite.object", id), attribute.String("hoplite.sender", sender),
			attribute.String("hoplite.receiver", receiver), attribute.Int64("hoplite.offset", c.Offset))
	}
	ended := func(err error) {
		tracing.End(span, err)
		system.EventStream.Publish(&events.TransferEnded{Object: id, Receiver: receiver, Sender: sender, Err: err, At: time.Now()})
	}
	size := c.Size
	w := run.p.Writer()
	if run.into == nil {
		size = w.Size()
	}
	system.EventStream.Publish(&events.TransferStarted{Object: id, Receiver: receiver, Sender: sender, Offset: c.Offset, Size: size, At: time.Now()})
	if run.cuts == nil {
		run.cuts = map[uint64]context.CancelFunc{}
	}
	if j := run.into; j != nil {
		// Bound to the caller's wait as well: a caller that gives up
		// waits for this copy to let go of its buffer.
		sctx, cut := context.WithCancel(j.req.Dst.Context())
		run.cuts[c.ID] = cut
		chunk := cfg.treeChunk(cfg.streamChunk(c.Size), c.Chunk)
		go func() {
			var upTo int64
			err := recovering(cfg.Log, id, func() (err error) {
				upTo, err = streamToBuffer(sctx, cfg, id, j.req.Dst, c.Sender, c.Offset, c.Size, chunk)
				return err
			})
			ended(err)
			system.Root.Send(self, &fetchStreamEnded{run: run, id: c.ID, upTo: upTo, err: err})
		}()
		return
	}
	sctx, cut := context.WithCancel(context.Background())
	run.cuts[c.ID] = cut
	chunk := cfg.treeChunk(cfg.streamChunk(w.Size()), c.Chunk)
	want := run.obj.Size()
	go func() {
		err := recovering(cfg.Log, id, func() error { return stream(sctx, cfg, id, want, w, c.Sender, c.Offset, chunk) })
		ended(err)
		system.Root.Send(self, &fetchStreamEnded{run: run, id: c.ID, err: err})
	}()
}

// recovering runs a stream from another member, on a goroutine of its
// own where a panic would end the whole member: a bug its bytes reach
// fails that stream with INTERNAL (the fetch then tries another sender
// or fails the Get), logged with its stack and counted (RecoveredPanics).
func recovering(log *logrus.Entry, id string, f func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			recoveredPanics.Add(1)
			log.WithFields(logrus.Fields{"object": id, "panic": p, "stack": string(debug.Stack())}).Error("a fetch's stream panicked; it fails")
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "stream of %q panicked: %v", id, p)
		}
	}()
	return f()
}

// samePID compares PIDs; protoactor's Equal dereferences a nil receiver.
func samePID(a, b *actor.PID) bool {
	return a != nil && b != nil && a.Equal(b)
}

// stream copies object id (size bytes) from sender, starting at off
// (what is already here). Every read is bounded by the stall timeout.
func stream(ctx context.Context, cfg *Config, id string, size int64, w *objstore.Writer, sender *messages.NodeRef, off int64, chunk int) error {
	octx, cancel := context.WithTimeout(ctx, cfg.stall())
	s, err := cfg.Transport.Open(octx, cfg.Self.GetDataAddress(), sender.GetDataAddress(), id, off, chunk)
	cancel()
	if err != nil {
		return err
	}
	defer s.Close()
	if s.Size() != size {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: sender has %d bytes, expected %d", id, s.Size(), size)
	}
	return streamInto(ctx, cfg, id, w, s, off)
}

// streamInto receives into the object's own buffer: each chunk lands
// where it belongs (on TCP, read from the socket straight there) and is
// published by Advance, with no other copy on this side (what lets a
// 1 GiB fetch keep up with a plain TCP read).
func streamInto(ctx context.Context, cfg *Config, id string, w *objstore.Writer, s transport.Stream, off int64) error {
	for {
		tail, err := w.Tail()
		if err != nil {
			return err
		}
		n, err := nextChunk(ctx, cfg, s, tail)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if h := cfg.Hooks.BeforeFetchChunk; h != nil {
			h(cfg.Self.GetNodeId(), id, off)
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

// nextChunk is s.NextInto(dst) within ctx, failed TIMEOUT once no byte of
// the chunk came for the stall timeout. A chunk whose bytes still come
// is waited for on: on a slow link (a bandwidth drop, a loaded sender) a
// whole chunk can take longer than the stall timeout, and bounding each
// chunk by it gave up a sender that was sending, to start the chunk
// again from its first byte, from the same sender, as often as the
// deadline allowed.
func nextChunk(ctx context.Context, cfg *Config, s transport.Stream, dst []byte) (int, error) {
	pc, _ := s.(transport.PayloadCounter)
	for {
		var before int64
		if pc != nil {
			before = pc.PayloadReceived()
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.stall())
		n, err := s.NextInto(cctx, dst)
		cancel()
		if err != nil && pc != nil && ctx.Err() == nil && errors.Is(err, messages.ErrTimeout) && pc.PayloadReceived() > before {
			continue // the stream stays usable after its ctx ended mid-chunk
		}
		return n, err
	}
}

// streamToBuffer copies object id (size bytes) from sender into the
// GetInto caller's buffer dst, from off (what earlier copies put there)
// on, and returns how far the buffer holds it. It holds the buffer
// throughout: no other goroutine writes it meanwhile, and the caller's
// GetInto returns only after it let go. Each chunk is put in its place by
// the stream (on TCP read from the socket straight there; in memory
// copied once). Nothing past size is written.
func streamToBuffer(ctx context.Context, cfg *Config, id string, dst *getinto.Buffer, sender *messages.NodeRef, off, size int64, chunk int) (int64, error) {
	b, ok := dst.Hold()
	if !ok {
		return off, messages.Errorf(messages.ErrorCode_CANCELED, "GetInto of %q: the buffer is no longer lent (the caller returned)", id)
	}
	defer dst.Release()
	if size > int64(len(b)) || off < 0 || off > size {
		return off, messages.Errorf(messages.ErrorCode_INTERNAL, "GetInto of %q: bytes %d..%d of a buffer of %d", id, off, size, len(b))
	}
	b = b[:size:size]
	octx, cancel := context.WithTimeout(ctx, cfg.stall())
	s, err := cfg.Transport.Open(octx, cfg.Self.GetDataAddress(), sender.GetDataAddress(), id, off, chunk)
	cancel()
	if err != nil {
		return off, err
	}
	defer s.Close()
	if s.Size() != size {
		return off, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: sender has %d bytes, expected %d", id, s.Size(), size)
	}
	for off < size {
		n, err := nextChunk(ctx, cfg, s, b[off:])
		if err == io.EOF {
			return off, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q: the stream from %s ended at %d of %d bytes", id, sender.GetNodeId(), off, size)
		}
		if err != nil {
			return off, err
		}
		if h := cfg.Hooks.BeforeFetchChunk; h != nil {
			h(cfg.Self.GetNodeId(), id, off)
		}
		if ctx.Err() != nil {
			return off, ctx.Err() // cut: a chunk ready in memory does not check ctx
		}
		off += int64(n)
	}
	return off, nil
}
