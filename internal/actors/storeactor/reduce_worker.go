package storeactor

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/netmodel"
	"github.com/hoplite-go/hoplite/internal/reduceio"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// reduceWorker is the child actor of a store node that runs one position
// of a reduce tree: it reduces the node's own source with its children's
// outputs chunk by chunk into its output (the target itself at the root),
// which its parent streams while it is being produced. It lives until the
// coordinator releases the Reduce, so its output stays readable, and it
// runs again, rewinding its output, whenever the coordinator sends a newer
// generation of its task (a descendant failed and was replaced).
//
// It is the shell of a storeproto.PositionRuns, which decides when runs start, stop
// and rewind; each run reduces on its own goroutine and reports its start
// and end back to this actor as messages.
type reduceWorker struct {
	cfg         *Config
	coordinator *actor.PID
	runs        *storeproto.PositionRuns
	cancel      context.CancelFunc // stops the active run
	// out is the output, shared with the store node, which drops it when
	// it handles a release that does not keep it (see positionOutput).
	out *positionOutput
	// tl is the first run's timeline (debug logs; see timeline), nil
	// unless the log is at debug level.
	tl *timeline
	// span traces the position, the child of its coordinator's span (a
	// no-op span when tracing is off).
	span trace.Span
}

// runStarted is a run's report that its output exists, or why not.
type runStarted struct {
	run uint64
	err *messages.Error
}

// runEnded is a run's last report.
type runEnded struct {
	run uint64
	end storeproto.RunEnd
}

// A run may report after its worker stopped (released): that is expected.
func (runStarted) IgnoreDeadLetterLogging() {}
func (runEnded) IgnoreDeadLetterLogging()   {}

func newReduceWorkerProps(cfg *Config, task *messages.ReduceTask, coordinator *actor.PID, out *positionOutput, received time.Time) *actor.Props {
	// A restarted worker's runs are numbered apart from its earlier
	// incarnation's, whose last run may still report to the same PID.
	var incarnations atomic.Uint64
	return actorutil.Props(func() actor.Actor {
		var to any
		if coordinator != nil {
			to = coordinator
		}
		runs := storeproto.NewPositionRuns(task, to)
		runs.NumberFrom(incarnations.Add(1) << 32)
		// The output is the position's, not one incarnation's: the store
		// node's release drops whatever any of them made.
		w := &reduceWorker{cfg: cfg, coordinator: coordinator, runs: runs, out: out}
		if cfg.Log.Logger.IsLevelEnabled(logrus.DebugLevel) {
			w.tl = &timeline{received: received} // only debug logs show it
		}
		return w
	})
}

func (w *reduceWorker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		if w.tl != nil {
			w.tl.started = time.Now()
		}
		t := w.runs.Task()
		_, w.span = tracing.Start(t.GetTraceParent(), tracing.Position, attribute.String("hoplite.reduce", t.GetReduceId()),
			attribute.Int("hoplite.position", int(t.GetPosition())), attribute.String("hoplite.node", w.cfg.Self.GetNodeId()))
		w.watchCoordinator(ctx)
		w.step(ctx, storeproto.RunsStart{})
	case *messages.ReduceTask:
		w.step(ctx, m)
	case *messages.ReduceInvalidate:
		w.step(ctx, m)
	case runStarted:
		w.step(ctx, storeproto.RunStarted{Run: m.run, Err: m.err, Dead: w.dead()})
	case runEnded:
		w.step(ctx, storeproto.RunEnded{Run: m.run, End: m.end, Dead: w.dead()})
	case *messages.ReduceRelease:
		// A target is kept only whole: a root's that its coordinator
		// committed, a gather's that it finished. A root whose result the
		// coordinator did not take (it moved the root elsewhere) holds a
		// target nobody may read whole: it goes.
		w.step(ctx, storeproto.RunsRelease{Keep: m.GetKeepTarget() && w.targetComplete()})
	case *actor.Terminated:
		if samePID(w.coordinator, m.GetWho()) {
			w.cfg.Log.WithField("reduce", w.runs.Task().GetReduceId()).Debug("reduce coordinator gone; releasing this position")
			w.step(ctx, storeproto.CoordinatorGone{TargetComplete: w.targetComplete() || w.targetAwaitsCommit()})
		}
	case *actor.Stopping, *actor.Restarting:
		w.step(ctx, storeproto.RunsStop{})
		tracing.End(w.span, nil)
	}
}

// watchCoordinator: no coordinator, no Reduce; its end cleans up.
func (w *reduceWorker) watchCoordinator(ctx actor.Context) {
	if w.coordinator != nil {
		ctx.Watch(w.coordinator)
	}
}

// dead reports whether this node's store has failed (fail-stop: it says
// nothing more).
func (w *reduceWorker) dead() bool { return w.cfg.Store.Failed() != nil }

// running is the position's runs with this worker's part of each step
// done as it is stepped, before its Box is carried out: a run canceled,
// the output rewound, a new run started.
type running struct {
	w   *reduceWorker
	ctx actor.Context
}

func (r running) Step(now time.Time, ev any) storeproto.RunStep {
	w := r.w
	s := w.runs.Step(now, ev)
	if s.Cancel != 0 && w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
	if s.Rewind {
		w.rewind(keepsTarget(w.runs.Task()))
	}
	if s.Run != nil {
		w.start(r.ctx, s.Run)
	}
	return s
}

// step steps the position's runs with ev on workerDrive, and releases
// the position when the step says so.
func (w *reduceWorker) step(ctx actor.Context, ev any) {
	s, _ := workerDrive.Step(ctx, w, running{w: w, ctx: ctx}, ev)
	if s.Release {
		w.release(s.KeepOutput)
		w.out.forget()
		ctx.Stop(ctx.Self())
	}
}

// workerDrive steps a position's runs and carries out their Box (the
// generic driver): its reports go to the coordinator's PID.
var workerDrive = &shell.Driver[*reduceWorker, any, storeproto.RunStep]{}

// start runs one generation on its own goroutine, bounded by the task's
// timeout; it reports back to this actor.
func (w *reduceWorker) start(ctx actor.Context, order *storeproto.RunOrder) {
	// Clamped (directory.MaxTimeout): a peer's timeout_ms past it
	// overflowed into a negative or garbage duration.
	timeout := w.cfg.timeout(order.Task.GetTimeoutMs())
	run, cancel := context.WithTimeout(context.Background(), timeout)
	w.cancel = cancel
	system, self := ctx.ActorSystem(), ctx.Self()
	go func() {
		defer cancel()
		w.tl.mark(stepRun)
		report := func(msg any) { system.Root.Send(self, msg) }
		began := false
		end := w.runRecovering(run, system, order.Task, func(err error) {
			began = true
			report(runStarted{run: order.ID, err: messages.AsError(err)})
		})
		if !began && end.Err != nil {
			report(runStarted{run: order.ID, err: end.Err})
		}
		report(runEnded{run: order.ID, end: end})
	}()
}

// recoveredPanics counts the panics a store node's goroutines recovered
// from (see RecoveredPanics).
var recoveredPanics atomic.Int64

// RecoveredPanics is how many panics the store nodes of this process
// recovered from in the goroutines that handle a peer's reduce task: each
// failed its position with INTERNAL instead of ending the process.
func RecoveredPanics() int64 { return recoveredPanics.Load() }

// runRecovering is run on a goroutine of its own, where a panic would
// end the whole member: a run reads a task and streams that other
// processes sent, so a bug they reach fails this position (INTERNAL, to
// its coordinator, which repairs or fails the Reduce) and is logged with
// its stack instead.
func (w *reduceWorker) runRecovering(ctx context.Context, system *actor.ActorSystem, t *messages.ReduceTask, started func(error)) (end storeproto.RunEnd) {
	defer func() {
		if p := recover(); p != nil {
			recoveredPanics.Add(1)
			w.cfg.Log.WithFields(logrus.Fields{"reduce": t.GetReduceId(), "position": t.GetPosition(), "generation": t.GetGeneration(),
				"panic": p, "stack": string(debug.Stack())}).Error("reduce task panicked; its position fails")
			end = storeproto.RunEnd{Report: true, Err: messages.Errorf(messages.ErrorCode_INTERNAL, "reduce task %s/%d panicked: %v", t.GetReduceId(), t.GetPosition(), p)}
		}
	}()
	return w.run(ctx, system, t, started)
}

// rewind clears the output now, so readers stop using bytes that contain
// a lost object. A complete target is never rewound: it already is the
// exact result of the sources its generation reduced, which its
// coordinator took (a root's target completes only at its commit).
func (w *reduceWorker) rewind(root bool) {
	o := w.out.load()
	if o == nil {
		return
	}
	if _, done, _ := o.Progress(); done && root {
		return
	}
	_ = o.NewWriter().Rewind()
}

// maxRestarts bounds how often one generation starts over because an
// input was rewound under it.
const maxRestarts = 64

// run reduces one generation. It calls started once its output exists
// (or could not be made) and returns how it ended; storeproto.PositionRuns decides
// what the coordinator hears of both.
func (w *reduceWorker) run(ctx context.Context, system *actor.ActorSystem, t *messages.ReduceTask, started func(error)) storeproto.RunEnd {
	pos, gen := t.GetPosition(), t.GetGeneration()
	log := w.cfg.Log.WithFields(logrus.Fields{"reduce": t.GetReduceId(), "position": pos, "generation": gen})
	out := w.out.load()
	if out == nil || out.ID() != t.GetOutputId() {
		// The first run, or a generation whose output has a new name (see
		// reduction.InternalID): the earlier one is nobody's input now.
		old := out
		var err error
		create := func() error {
			out, err = w.createOutput(ctx, system, t)
			return err
		}
		if h := w.cfg.Hooks.AroundReduceOutput; h != nil {
			h(w.cfg.Self.GetNodeId(), t, create)
		} else {
			_ = create()
		}
		if err != nil {
			log.WithField("error", err).Debug("reduce position could not start")
			started(stopped(ctx, err))
			return storeproto.RunEnd{}
		}
		if old != nil {
			w.cfg.Store.Abort(old, messages.Errorf(messages.ErrorCode_RESET, "reduce %s position %d: generation %d replaced this output", t.GetReduceId(), pos, gen))
		}
		if w.out.isReleased() {
			// Released since the output was made (a root waits for the
			// shard meanwhile): the release dropped it already.
			started(stopped(ctx, errReleased))
			return storeproto.RunEnd{}
		}
	}
	if keepsTarget(t) {
		// A root that runs again on this node reuses its output: the
		// marks name the generation writing it now, which alone its
		// coordinator's commit can complete (objstore.Store.CommitTarget).
		out.SetProducer(t.GetReduceId(), t.GetGeneration())
	}
	w.tl.mark(stepCreated)
	started(nil)
	if t.GetSlices() > 0 {
		log.WithFields(logrus.Fields{"bandwidth": t.GetBandwidth(), "chunk": w.cfg.sharedStreamChunk(t.GetSize(), slicedStreams(t), t.GetBandwidth())}).
			Debug("sliced AllReduce position")
	}
	for restarts := 0; ; restarts++ {
		if ctx.Err() != nil {
			// Stopped between two attempts: no new writer for a run that
			// is over (see storeproto.PositionRuns).
			return storeproto.RunEnd{Report: true, Err: stopped(ctx, ctx.Err())}
		}
		wr := out.NewWriter() // supersedes an earlier run's writer
		if _, done, _ := out.Progress(); done && keepsTarget(t) {
			return storeproto.RunEnd{} // the coordinator committed an earlier generation's target: it stands
		}
		if written, _, _ := out.Progress(); written > 0 || out.Epoch() > 0 || t.GetGeneration() > 1 {
			if err := wr.Rewind(); err != nil {
				// The output was dropped under the run. Released: nobody
				// listens. Otherwise the coordinator must hear it, or it
				// waits for this position until its deadline.
				return storeproto.RunEnd{Report: true, Err: stopped(ctx, err)}
			}
		}
		var err error
		var fp uint64
		var m measured
		switch {
		case t.GetGather():
			fp, err = w.gather(ctx, t, out, wr)
		case t.GetRelay():
			err = w.relay(ctx, t, out, wr)
		default:
			m, fp, err = w.reduce(ctx, t, out, wr)
		}
		w.tl.log(w.cfg.Log, t)
		switch {
		case err == nil:
			return storeproto.RunEnd{Report: true, Fingerprint: fp, MeasuredBytes: m.bytes, MeasuredNanos: int64(m.wait)}
		case ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			// Superseded by a newer generation (the coordinator ignores
			// this report), released (nobody listens), or stopped with its
			// store node's restart: then the Reduce fails, clearly.
			return storeproto.RunEnd{Report: true, Err: stopped(ctx, err)}
		case errors.Is(err, messages.ErrReset) && restarts < maxRestarts:
			log.Debug("an input was rewound; reducing again")
			continue
		case errors.Is(err, messages.ErrUnavailable) || errors.Is(err, messages.ErrCanceled):
			// An input's node failed: the coordinator watches it and sends
			// a new generation of this task (or fails the Reduce).
			log.WithField("error", err).Info("reduce input lost; waiting for the repaired task")
			return storeproto.RunEnd{}
		}
		log.WithField("error", err).Debug("reduce position failed")
		return storeproto.RunEnd{Report: true, Err: messages.AsError(err)}
	}
}

// sourceCopyGone turns err, the failure of tree task t to open the copy
// of input id on node, into UNAVAILABLE when the input is a source (an
// application object) whose copy is not there: evicted to make room, or
// dropped, after the coordinator placed it. The directory tells the
// coordinator that the copy left, and it places the source elsewhere (a
// repaired task); NOT_FOUND failed the whole Reduce with NOT_FOUND for a
// source that exists. A Reduce intermediate's error stays as it is, and
// so does a sliced AllReduce's, reported at once: that run cannot place a
// source again, so its coordinator takes the NOT_FOUND as the copy's
// departure and re-plans as a tree (Reduction.slicedSourceGone).
func sourceCopyGone(t *messages.ReduceTask, id, node string, err error) error {
	if !errors.Is(err, messages.ErrNotFound) || strings.HasPrefix(id, internalPrefix) || t.GetSliced() || t.GetSlices() > 0 {
		return err
	}
	return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the copy of source %q on %s is gone (%v); waiting for the repaired task", id, node, err)
}

// stopped names why a run ended: a canceled run was stopped (its node
// restarted, or a newer generation replaced it), which callers see as
// UNAVAILABLE; other errors stay as they are.
func stopped(ctx context.Context, err error) *messages.Error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "reduce worker stopped (its node restarted or the position was re-run)")
	}
	return messages.AsError(err)
}

// createOutput makes the position's output object. The root's is the
// target: created as a pinned creator copy and registered with the shard,
// which announces it as a partial location at once (Gets and composed
// Reduces stream from it while it is produced). A position released
// before it gets here makes nothing (see positionOutput).
func (w *reduceWorker) createOutput(ctx context.Context, system *actor.ActorSystem, t *messages.ReduceTask) (*objstore.Object, error) {
	var evicted []string
	out, prev, err := w.out.create(keepsTarget(t), func() (o *objstore.Object, err error) {
		o, evicted, err = w.makeOutput(t)
		return o, err
	})
	if err != nil {
		return nil, err
	}
	for _, id := range evicted {
		system.Root.Send(w.cfg.ShardFor(id), &messages.UnpublishLocation{ObjectId: id, Node: w.cfg.Self})
	}
	if !t.GetRoot() {
		return out, nil
	}
	// A sliced AllReduce's creator gather registers the target unoffered:
	// its bytes are the result only once every gather is done, when the
	// coordinator publishes the copies (a Get that streamed them earlier
	// could hold the bytes of a run a participant's failure abandoned).
	res, err := actorutil.Request(ctx, system.Root, w.cfg.ShardFor(t.GetTargetId()), &messages.CreateObject{ObjectId: t.GetTargetId(),
		Size: t.GetSize(), Creator: w.cfg.Self, ReduceId: t.GetReduceId(), ReduceGeneration: t.GetGeneration(), Unoffered: t.GetGather()})
	refused := false
	if err == nil {
		if cr, ok := res.(*messages.CreateObjectReply); !ok {
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to CreateObject", res)
		} else {
			err = messages.ErrOrNil(cr.GetError())
			refused = err != nil
		}
	}
	if err != nil {
		// A Get may be waiting on this object (a promoted placeholder).
		// If this run was stopped it learns UNAVAILABLE. If the shard
		// refused the target to this run (its Reduce ended, or a newer
		// root took over), the object is another run's to create or
		// nobody's: the Get asks again (RESET) and waits for it as for
		// any object, instead of failing with the refusal meant for us.
		why := stopped(ctx, err)
		if refused && ctx.Err() == nil {
			why = messages.Errorf(messages.ErrorCode_RESET, "the shard refused %q to this reduce run: %v", t.GetTargetId(), err)
		}
		w.cfg.Store.Abort(out, why)
		w.out.undo(out, prev)
		return nil, err
	}
	return out, nil
}

// makeOutput makes the output object in the store, with the marks that
// say which run writes it, and returns the ids it evicted for room.
func (w *reduceWorker) makeOutput(t *messages.ReduceTask) (*objstore.Object, []string, error) {
	allocAt := time.Now()
	out, evicted, err := w.cfg.Store.Create(t.GetOutputId(), t.GetSize(), 0)
	w.tl.markAlloc(time.Since(allocAt))
	if errors.Is(err, messages.ErrConflict) && keepsTarget(t) {
		local := w.cfg.Store.Lookup(t.GetOutputId())
		if local != nil && local.Pinned() && local.GatherCopy() && olderRun(local, t) {
			// An older run of this Reduce wrote the target here: a gather
			// of a sliced run that the coordinator abandoned for a tree.
			// Its bytes are not this run's result. (An older run never
			// removes a newer one's copy: generations only grow, and a
			// released position makes nothing; see positionOutput.)
			w.cfg.Store.Abort(local, messages.Errorf(messages.ErrorCode_RESET, "%q is produced again on this node", t.GetOutputId()))
			out, evicted, err = w.cfg.Store.Create(t.GetOutputId(), t.GetSize(), 0)
		} else if local != nil && local.Pinned() && staleUncommitted(local, t) {
			// Another run's copy of the target that no commit completed:
			// no result, and nobody read it whole (its last byte was held
			// back). Its coordinator is gone (a Reduce started again at
			// its target shard's new home, a released one whose worker
			// kept the copy for a commit that never came), or this run
			// would not hold the reservation.
			w.cfg.Store.Abort(local, messages.Errorf(messages.ErrorCode_RESET, "%q is produced again on this node", t.GetOutputId()))
			out, evicted, err = w.cfg.Store.Create(t.GetOutputId(), t.GetSize(), 0)
		} else if local != nil && !local.Pinned() {
			if local.Size() < 0 {
				// A Get of the target on this node left a placeholder while
				// it waited: the root fills it, as a Put would.
				out = local
				evicted, err = w.cfg.Store.Promote(local, t.GetSize(), 0)
			} else {
				// A copy fetched from an earlier root of this Reduce: stale.
				// Its readers get RESET and ask again.
				w.cfg.Store.Remove(t.GetOutputId(), messages.Errorf(messages.ErrorCode_RESET, "%q is produced again on this node", t.GetOutputId()))
				out, evicted, err = w.cfg.Store.Create(t.GetOutputId(), t.GetSize(), 0)
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if keepsTarget(t) {
		// A gather's is a copy of the target too, partial until the
		// gather ends: a shard rebuilt meanwhile drops it rather than
		// record a copy nobody finishes (see
		// objstore.Object.Publication). A newer run's root reads the
		// marks (olderRun).
		out.SetProducer(t.GetReduceId(), t.GetGeneration())
		// Readable as it is produced, but whole only once the coordinator
		// takes this run's result (see StoreNode.reduceCommit).
		out.HoldTail()
	}
	if t.GetGather() {
		out.MarkGatherCopy()
	}
	return out, evicted, nil
}

// reduce reduces the position's own source with its children's outputs
// into out, and returns what it measured and, at a tree's root, the
// target's fingerprint. A root's target stays incomplete, its last byte
// held back, until its coordinator commits it (see commit); every other
// output completes here.
func (w *reduceWorker) reduce(ctx context.Context, t *messages.ReduceTask, out *objstore.Object, wr *objstore.Writer) (measured, uint64, error) {
	// The run measures the link (see observe) only if every input was
	// whole when it was opened: a read that waits for a producer (a Put
	// still copying, a child still reducing) would be counted as the
	// network's time, and on TCP a peer's bytes pile up in the socket
	// while the run waits for another input, so its reads then look free.
	whole := w.wholeHere(t.GetSourceId()) && t.GetSize() >= netmodel.MinMeasuredTransfer
	r, err := w.cfg.Store.OpenObject(ctx, t.GetSourceId())
	if err != nil {
		return measured{}, 0, sourceCopyGone(t, t.GetSourceId(), w.cfg.Self.GetNodeId(), err)
	}
	if t.GetSliced() {
		// A slice of a sliced AllReduce: its own bytes, read in place.
		if r, err = reduceio.NewSliceReader(r, t.GetSourceOffset(), t.GetSize()); err != nil {
			return measured{}, 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "source %q: %v", t.GetSourceId(), err)
		}
	}
	// One size for all of this task's streams, at most the chunk the
	// coordinator chose for the tree's depth.
	chunk := w.cfg.treeChunk(w.cfg.sharedStreamChunk(t.GetSize(), slicedStreams(t), t.GetBandwidth()), t.GetChunk())
	own := reduceio.NewLocalStream(r, chunk)
	defer own.Close()
	var ownIn transport.Stream = own
	if len(t.GetChildren()) == 0 {
		ownIn = w.tl.firstByte(own) // a leaf's first byte is its own
	}
	if own.Size() != t.GetSize() {
		return measured{}, 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "source %q has %d bytes, the Reduce expects %d", t.GetSourceId(), own.Size(), t.GetSize())
	}
	kids := make([]transport.Stream, 0, len(t.GetChildren()))
	defer func() {
		for _, k := range kids {
			k.Close()
		}
	}()
	var remote []*timedStream
	for _, c := range t.GetChildren() {
		whole = whole && c.GetComplete()
		s, err := w.open(ctx, c, chunk, paced(t))
		if err != nil {
			return measured{}, 0, sourceCopyGone(t, c.GetObjectId(), c.GetNode().GetNodeId(), err)
		}
		if c.GetNode().GetNodeId() != w.cfg.Self.GetNodeId() {
			ts := &timedStream{Stream: s}
			remote, s = append(remote, ts), ts
		}
		kids = append(kids, w.tl.firstByte(s))
		if s.Size() != t.GetSize() {
			return measured{}, 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "input %q on %s has %d bytes, the Reduce expects %d",
				c.GetObjectId(), c.GetNode().GetNodeId(), s.Size(), t.GetSize())
		}
	}
	w.tl.markLast(stepOpened)
	var fp fingerprint.Writer
	onRange := func([]byte) {}
	if t.GetRoot() {
		onRange = fp.Write
	}
	if err := reduceio.Combine(ctx, wr, t.GetSize(), chunk, t.GetOp(), t.GetDtype(), w.hooked(ownIn, t.GetSourceId(), t.GetSourceOffset()), kids, onRange); err != nil {
		return measured{}, 0, err
	}
	if ctx.Err() != nil {
		return measured{}, 0, messages.AsError(ctx.Err())
	}
	var m measured
	if whole {
		m = w.observe(remote)
	}
	if t.GetRoot() {
		// Whole, and held: the coordinator commits it (see
		// StoreNode.reduceCommit).
		return m, fp.Sum(), nil
	}
	if err := w.cfg.Store.Complete(out); err != nil {
		return measured{}, 0, err
	}
	return m, 0, nil
}

// wholeHere reports whether this node's copy of id is complete now.
func (w *reduceWorker) wholeHere(id string) bool {
	o := w.cfg.Store.Lookup(id)
	if o == nil {
		return false
	}
	_, done, err := o.Progress()
	return done && err == nil
}

// observe feeds the bandwidth estimate with the peers' streams of a run
// whose inputs were all whole: Gets from complete copies are not the only
// traffic (a cluster that only reduces would keep the default B, and the
// default chunk size, for ever). The streams are added up because they
// share this node's downlink, which is what the cost model's d·S/B is
// about; only the time the reads waited counts, not the kernel's.
func (w *reduceWorker) observe(remote []*timedStream) measured {
	if w.cfg.Estimator == nil || len(remote) == 0 {
		return measured{}
	}
	var m measured
	for _, s := range remote {
		m.bytes += s.Size()
		m.wait += s.wait
	}
	w.cfg.Estimator.ObserveTransfer(m.bytes, m.wait)
	return m
}

// measured is a transfer that measured the link: bytes in wait.
type measured struct {
	bytes int64
	wait  time.Duration
}

// timedStream is a peer's stream that adds up how long its reads waited.
// One run reads it from one goroutine.
type timedStream struct {
	transport.Stream
	wait time.Duration
}

func (s *timedStream) Next(ctx context.Context) ([]byte, error) {
	begin := time.Now()
	b, err := s.Stream.Next(ctx)
	s.wait += time.Since(begin)
	return b, err
}

func (s *timedStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	begin := time.Now()
	n, err := s.Stream.NextInto(ctx, dst)
	s.wait += time.Since(begin)
	return n, err
}

// slicedStreams is how many streams share a participant's link in t's
// AllReduce: 2(n−1) in a sliced one (n−1 chains' and n−1 relays' or
// gathers'), else 1.
func slicedStreams(t *messages.ReduceTask) int {
	if t.GetSlices() == 0 {
		return 1
	}
	return plan.SlicedStreams(int(t.GetSlices()))
}

// paced says whether t's inputs ask their senders to pace them: a sliced
// AllReduce's streams leave every node together and must share its link
// evenly (transport.EgressPacer).
func paced(t *messages.ReduceTask) bool { return t.GetSlices() > 0 }

// open streams one input: from this node's store directly, or from a
// peer over the data plane, paced by the sender if paced.
func (w *reduceWorker) open(ctx context.Context, in *messages.ReduceInput, chunk int, paced bool) (transport.Stream, error) {
	octx, cancel := context.WithTimeout(ctx, w.cfg.stall())
	defer cancel()
	if in.GetNode().GetNodeId() == w.cfg.Self.GetNodeId() {
		r, err := w.cfg.Store.OpenObject(octx, in.GetObjectId())
		if err != nil {
			return nil, err
		}
		return reduceio.NewLocalStream(r, chunk), nil
	}
	if paced {
		return transport.OpenPaced(octx, w.cfg.Transport, w.cfg.Self.GetDataAddress(), in.GetNode().GetDataAddress(), in.GetObjectId(), 0, chunk)
	}
	return w.cfg.Transport.Open(octx, w.cfg.Self.GetDataAddress(), in.GetNode().GetDataAddress(), in.GetObjectId(), 0, chunk)
}

// targetAwaitsCommit reports whether the position's run wrote its copy of
// the target whole, held back until its coordinator's commit (the node
// applies it: see StoreNode.reduceCommit).
func (w *reduceWorker) targetAwaitsCommit() bool {
	o := w.out.load()
	return o != nil && keepsTarget(w.runs.Task()) && o.HeldWhole()
}

func (w *reduceWorker) targetComplete() bool {
	o := w.out.load()
	if o == nil || !keepsTarget(w.runs.Task()) {
		return false
	}
	_, done, err := o.Progress()
	return done && err == nil
}

// release frees the output unless storeproto.PositionRuns keeps it: intermediate
// outputs always go, the target only when the Reduce failed (the shard
// forgets its locations then too).
func (w *reduceWorker) release(keep bool) {
	if keep {
		if t := w.runs.Task(); t.GetGather() && !t.GetRoot() {
			// A participant's copy of the target, published by the
			// coordinator: from now on an ordinary, evictable copy.
			if o := w.out.load(); o != nil {
				w.cfg.Store.Unpin(o)
			}
		}
		return
	}
	// The store node dropped it already if the release came through it
	// (see positionOutput); a coordinator that stopped did not.
	if o, target := w.out.release(); o != nil {
		dropReleased(w.cfg.Store, o, target, w.runs.Task().GetReduceId())
	}
}

// olderRun reports whether o is a copy of the target that an older
// generation of t's Reduce writes. Only a sliced run's gather copy is
// replaced this way (see createOutput): a tree root's own target, even
// of an older generation, is its worker's to rewind, and replacing it
// under a d-ary AllReduce's participants lost their copies
// (TestAllReduceParticipantKilledBeforeItsGet failed 4 runs in 8).
func olderRun(o *objstore.Object, t *messages.ReduceTask) bool {
	rid, gen := o.Producer()
	return rid == t.GetReduceId() && gen < t.GetGeneration()
}

// staleUncommitted reports whether o is a copy of the target that another
// run wrote (another Reduce's, or an older generation of t's) and that no
// commit completed.
func staleUncommitted(o *objstore.Object, t *messages.ReduceTask) bool {
	rid, gen := o.Producer()
	return o.Uncommitted() && (rid != t.GetReduceId() || gen < t.GetGeneration())
}

// keepsTarget reports whether the position's output is (a copy of) the
// Reduce's target, which outlives the Reduce: the root's, or a gather's
// in a sliced AllReduce. Such an output completes only at its
// coordinator's commit (until then its last byte is held back from its
// readers: objstore.Object.HoldTail), and once complete it is never
// rewound.
func keepsTarget(t *messages.ReduceTask) bool { return t.GetRoot() || t.GetGather() }

// gather assembles the target of a sliced AllReduce: every child is one
// reduced slice, on this node (its own root's output, or a relay's when
// the all-gather goes around the ring) or on the peer that reduced it,
// and lands at its offset in the target's buffer, in place. The slices
// are copied at once, one goroutine each; either way every uplink and
// downlink carries (N-1)/N of the object, as in a ring's all-gather. The bytes become
// readable all at once, so a Get never streams a copy with holes in it.
// The root's gather created the target in the directory, as a partial
// copy (createOutput); no gather publishes its complete copy: the
// coordinator does, for all of them, once every gather is done, so an
// AllReduce that fails leaves nothing its release of the target misses.
// It returns the copy's fingerprint for that.
//
// The target's buffer is made when the first slice's first bytes arrive
// (reduceio.CopyStreamLazy), after the chains have filled: made at the
// start, with the chains' outputs, the 32 MiB of a gather of 32 MiB were
// most of what 8 members allocated at once, on 2 vCPUs, and the garbage
// collection that allocation started ran in the same window
// (BenchmarkSlicedAllReduceStagger, runtime traces).
func (w *reduceWorker) gather(ctx context.Context, t *messages.ReduceTask, out *objstore.Object, wr *objstore.Writer) (uint64, error) {
	size := t.GetSize()
	var (
		once   sync.Once
		buf    []byte
		bufErr error
	)
	target := func() ([]byte, error) {
		once.Do(func() {
			if buf, bufErr = wr.Tail(); bufErr == nil && int64(len(buf)) != size {
				bufErr = messages.Errorf(messages.ErrorCode_INTERNAL, "gather into %q: %d of %d bytes free", t.GetOutputId(), len(buf), size)
			}
		})
		return buf, bufErr
	}
	kids := t.GetChildren()
	ends := make([]int64, len(kids))
	for i, c := range kids {
		ends[i] = size
		if i+1 < len(kids) {
			ends[i] = kids[i+1].GetOffset()
		}
		if c.GetOffset() < 0 || c.GetOffset() > ends[i] {
			return 0, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "gather into %q: slice %d at [%d, %d)", t.GetOutputId(), i, c.GetOffset(), ends[i])
		}
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	chunk := w.cfg.sharedStreamChunk(size/int64(max(len(kids), 1)), slicedStreams(t), t.GetBandwidth())
	errs := make(chan error, len(kids))
	for i, c := range kids {
		go func() {
			err := w.gatherOne(gctx, c, chunk, paced(t), target, c.GetOffset(), ends[i])
			if err != nil {
				cancel() // the others are pointless now
			}
			errs <- err
		}()
	}
	var first error
	for range kids {
		if err := <-errs; err != nil && (first == nil || errors.Is(first, context.Canceled) || errors.Is(first, messages.ErrCanceled)) {
			first = err
		}
	}
	if first != nil {
		return 0, first
	}
	if ctx.Err() != nil {
		return 0, messages.AsError(ctx.Err())
	}
	if _, err := target(); err != nil { // no slice made it (none had bytes)
		return 0, err
	}
	var fp fingerprint.Writer
	fp.Write(buf)
	if err := wr.Advance(int(size)); err != nil {
		return 0, err
	}
	// Whole, and held until the coordinator commits it: a Get on this
	// node returned a run that a participant's failure then abandoned.
	// Pinned (as the Store creates it) until the release: an eviction
	// would unpublish a copy the coordinator has yet to publish.
	return fp.Sum(), nil
}

// relay copies its one child, a reduced slice on the participant before
// this one, into its output as the bytes arrive, for the next
// participant's relay and this node's gather to read (a sliced
// AllReduce's ring all-gather).
func (w *reduceWorker) relay(ctx context.Context, t *messages.ReduceTask, out *objstore.Object, wr *objstore.Writer) error {
	chunk := w.cfg.sharedStreamChunk(t.GetSize(), slicedStreams(t), t.GetBandwidth())
	s, err := w.open(ctx, t.GetChildren()[0], chunk, paced(t))
	if err != nil {
		return err
	}
	defer s.Close()
	w.tl.markLast(stepOpened)
	if s.Size() != t.GetSize() {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "relay input %q has %d bytes, the slice is %d",
			t.GetChildren()[0].GetObjectId(), s.Size(), t.GetSize())
	}
	in := w.hooked(w.tl.firstByte(s), t.GetChildren()[0].GetObjectId(), 0)
	if err := reduceio.Relay(ctx, wr, in, t.GetSize()); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return messages.AsError(ctx.Err())
	}
	return w.cfg.Store.Complete(out)
}

// gatherOne copies one reduced slice into [off, end) of the target's
// buffer, which target makes once the slice's first bytes are in.
func (w *reduceWorker) gatherOne(ctx context.Context, in *messages.ReduceInput, chunk int, paced bool, target func() ([]byte, error), off, end int64) error {
	s, err := w.open(ctx, in, chunk, paced)
	if err != nil {
		return err
	}
	defer s.Close()
	w.tl.markLast(stepOpened)
	return reduceio.CopyStreamLazy(ctx, w.hooked(w.tl.firstByte(s), in.GetObjectId(), 0), end-off, func() ([]byte, error) {
		buf, err := target()
		if err != nil {
			return nil, err
		}
		return buf[off:end:end], nil
	})
}
