package storenode

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/transport"
)

// reduceWorker is the child actor of a store node that runs one position
// of a reduce tree: it reduces the node's own source with its children's
// outputs chunk by chunk into its output (the target itself at the root),
// which its parent streams while it is being produced. It lives until the
// coordinator releases the Reduce, so its output stays readable.
type reduceWorker struct {
	cfg         *Config
	task        *messages.ReduceTask
	coordinator *actor.PID
	cancel      context.CancelFunc
	out         atomic.Pointer[Object] // set by the run goroutine once created
}

func newReduceWorkerProps(cfg *Config, task *messages.ReduceTask, coordinator *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &reduceWorker{cfg: cfg, task: task, coordinator: coordinator}
	})
}

func (w *reduceWorker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		timeout := time.Duration(w.task.GetTimeoutMs()) * time.Millisecond
		if timeout <= 0 {
			timeout = w.cfg.DefaultTimeout
		}
		run, cancel := context.WithTimeout(context.Background(), timeout)
		w.cancel = cancel
		system := ctx.ActorSystem()
		go w.run(run, system)
	case *messages.ReduceRelease:
		w.release(ctx.ActorSystem(), m.GetKeepTarget())
		ctx.Stop(ctx.Self())
	case *actor.Stopping:
		if w.cancel != nil {
			w.cancel()
		}
	}
}

func (w *reduceWorker) report(system *actor.ActorSystem, msg any) {
	if w.coordinator != nil {
		system.Root.Send(w.coordinator, msg)
	}
}

func (w *reduceWorker) run(ctx context.Context, system *actor.ActorSystem) {
	t := w.task
	pos := t.GetPosition()
	log := w.cfg.Log.WithFields(logrus.Fields{"reduce": t.GetReduceId(), "position": pos})
	out, err := w.createOutput(ctx, system)
	if err != nil {
		log.WithField("error", err).Debug("reduce position could not start")
		w.report(system, &messages.ReduceTaskStarted{ReduceId: t.GetReduceId(), Position: pos, Error: messages.AsError(err)})
		return
	}
	w.out.Store(out)
	w.report(system, &messages.ReduceTaskStarted{ReduceId: t.GetReduceId(), Position: pos})
	err = w.reduce(ctx, system, out)
	if err != nil {
		log.WithField("error", err).Debug("reduce position failed")
		w.cfg.Store.Abort(out, err)
	}
	w.report(system, &messages.ReduceTaskDone{ReduceId: t.GetReduceId(), Position: pos, Error: messages.AsError(err)})
}

// createOutput makes the position's output object. The root's is the
// target: created as a pinned creator copy and registered with the shard,
// which announces it as a partial location at once (Gets and composed
// Reduces stream from it while it is produced).
func (w *reduceWorker) createOutput(ctx context.Context, system *actor.ActorSystem) (*Object, error) {
	t := w.task
	out, evicted, err := w.cfg.Store.Create(t.GetOutputId(), t.GetSize(), 0)
	if err != nil {
		return nil, err
	}
	for _, id := range evicted {
		system.Root.Send(w.cfg.ShardFor(id), &messages.UnpublishLocation{ObjectId: id, Node: w.cfg.Self})
	}
	if !t.GetRoot() {
		return out, nil
	}
	res, err := request(ctx, system.Root, w.cfg.ShardFor(t.GetTargetId()), &messages.CreateObject{ObjectId: t.GetTargetId(),
		Size: t.GetSize(), Creator: w.cfg.Self, ReduceId: t.GetReduceId()})
	if err == nil {
		if cr, ok := res.(*messages.CreateObjectReply); !ok {
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to CreateObject", res)
		} else {
			err = messages.ErrOrNil(cr.GetError())
		}
	}
	if err != nil {
		w.cfg.Store.Abort(out, err)
		return nil, err
	}
	return out, nil
}

func (w *reduceWorker) reduce(ctx context.Context, system *actor.ActorSystem, out *Object) error {
	t := w.task
	r, err := w.cfg.Store.OpenObject(ctx, t.GetSourceId())
	if err != nil {
		return err
	}
	own := &localStream{r: r, chunk: w.cfg.ChunkSize}
	defer own.Close()
	if own.Size() != t.GetSize() {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "source %q has %d bytes, the Reduce expects %d", t.GetSourceId(), own.Size(), t.GetSize())
	}
	kids := make([]transport.Stream, 0, len(t.GetChildren()))
	defer func() {
		for _, k := range kids {
			k.Close()
		}
	}()
	for _, c := range t.GetChildren() {
		s, err := w.open(ctx, c)
		if err != nil {
			return err
		}
		kids = append(kids, s)
		if s.Size() != t.GetSize() {
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "input %q on %s has %d bytes, the Reduce expects %d",
				c.GetObjectId(), c.GetNode().GetNodeId(), s.Size(), t.GetSize())
		}
	}
	var fp fingerprinter
	onRange := func([]byte) {}
	if t.GetRoot() {
		onRange = fp.write
	}
	if err := combine(ctx, out.NewWriter(), t.GetSize(), w.cfg.ChunkSize, t.GetOp(), t.GetDtype(), own, kids, onRange); err != nil {
		return err
	}
	if err := w.cfg.Store.Complete(out); err != nil {
		return err
	}
	if t.GetRoot() {
		system.Root.Send(w.cfg.ShardFor(t.GetTargetId()), &messages.PublishLocation{ObjectId: t.GetTargetId(), Node: w.cfg.Self,
			State: messages.LocationState_COMPLETE, Size: t.GetSize(), Fingerprint: fp.sum(), Creator: true})
	}
	return nil
}

// open streams one input: from this node's store directly, or from a
// peer over the data plane.
func (w *reduceWorker) open(ctx context.Context, in *messages.ReduceInput) (transport.Stream, error) {
	octx, cancel := context.WithTimeout(ctx, w.cfg.StallTimeout)
	defer cancel()
	if in.GetNode().GetNodeId() == w.cfg.Self.GetNodeId() {
		r, err := w.cfg.Store.OpenObject(octx, in.GetObjectId())
		if err != nil {
			return nil, err
		}
		return &localStream{r: r, chunk: w.cfg.ChunkSize}, nil
	}
	return w.cfg.Transport.Open(octx, w.cfg.Self.GetDataAddress(), in.GetNode().GetDataAddress(), in.GetObjectId(), 0, w.cfg.ChunkSize)
}

// release frees the output: intermediate outputs always, the target only
// when the Reduce failed (the shard forgets its locations then too).
func (w *reduceWorker) release(system *actor.ActorSystem, keep bool) {
	if w.cancel != nil {
		w.cancel()
	}
	t := w.task
	if t.GetRoot() && keep {
		return
	}
	if o := w.out.Load(); o != nil {
		// Abort drops the object only while it is still the store's copy
		// of that id, so a later object of the same id is never touched.
		w.cfg.Store.Abort(o, messages.Errorf(messages.ErrorCode_NOT_FOUND, "reduce %s released its output", t.GetReduceId()))
	}
}
