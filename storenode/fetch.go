package storenode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/netmodel"
	"github.com/hoplite-go/hoplite/transport"
)

// fetchSession is the child actor of a store node that brings one object
// to this node: it asks the directory for a sender, streams the bytes into
// the store, and asks again (resuming at its offset) if the sender fails.
// The copying runs on a goroutine the session owns and stops on Stopping.
type fetchSession struct {
	cfg      *Config
	obj      *Object
	deadline *atomic.Int64
	cancel   context.CancelFunc
	// watching is the sender being streamed from: its Terminated cuts the
	// stream at once instead of waiting for the stall timeout.
	watching *actor.PID
	cut      context.CancelFunc
}

type fetchResult struct{ err error }

// watchSender asks the session actor to watch the current sender; cut
// ends the attempt if the sender terminates.
type watchSender struct {
	pid *actor.PID
	cut context.CancelFunc
}

type unwatchSender struct{ pid *actor.PID }

func newFetchProps(cfg *Config, obj *Object, deadline *atomic.Int64) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &fetchSession{cfg: cfg, obj: obj, deadline: deadline}
	})
}

func (f *fetchSession) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		run, cancel := context.WithCancel(context.Background())
		f.cancel = cancel
		self, system := ctx.Self(), ctx.ActorSystem()
		go func() {
			err := f.run(run, system, self)
			system.Root.Send(self, &fetchResult{err: err})
		}()
	case *watchSender:
		f.unwatch(ctx)
		f.watching, f.cut = m.pid, m.cut
		ctx.Watch(m.pid)
	case *unwatchSender:
		if samePID(f.watching, m.pid) {
			f.unwatch(ctx)
		}
	case *actor.Terminated:
		if samePID(f.watching, m.GetWho()) {
			f.cfg.Log.WithFields(logrus.Fields{"object": f.obj.ID(), "sender": m.GetWho().GetId()}).Info("sender terminated")
			f.cut()
			f.watching, f.cut = nil, nil
		}
	case *fetchResult:
		if m.err != nil && !errors.Is(m.err, messages.ErrCanceled) {
			f.cfg.Log.WithFields(logrus.Fields{"object": f.obj.ID(), "error": m.err}).Debug("fetch failed")
		}
		ctx.Send(ctx.Parent(), &fetchEnded{id: f.obj.ID(), pid: ctx.Self()})
		ctx.Stop(ctx.Self())
	case *actor.Stopping, *actor.Restarting:
		// A restarted session runs anew: this run must end, or two would
		// copy (the writer generation keeps their bytes apart regardless).
		if f.cancel != nil {
			f.cancel()
		}
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		f.cfg.Log.WithFields(logrus.Fields{"object": f.obj.ID(), "type": fmt.Sprintf("%T", m)}).Warn("fetch session: unknown message dropped")
	}
}

// samePID compares PIDs; protoactor's Equal dereferences a nil receiver.
func samePID(a, b *actor.PID) bool {
	return a != nil && b != nil && a.Equal(b)
}

func (f *fetchSession) unwatch(ctx actor.Context) {
	if f.watching != nil {
		ctx.Unwatch(f.watching)
		f.watching, f.cut = nil, nil
	}
}

// maxRewinds bounds how often one fetch starts over because its source
// was rewound (each rewind is a repair of a Reduce upstream).
const maxRewinds = 64

// run locates a sender and streams from it until the object is complete.
// Every wait is bounded: locating by the Gets' deadline, streaming by the
// stall timeout on each chunk.
func (f *fetchSession) run(ctx context.Context, system *actor.ActorSystem, self *actor.PID) error {
	id, me := f.obj.ID(), f.cfg.Self
	// Taking the writer first cuts off a session this one resumes from:
	// its goroutine may still hold a chunk, which now cannot land.
	w := f.obj.NewWriter()
	if _, done, err := f.obj.Progress(); done || err != nil {
		return err // finished (or dropped) before this session began
	}
	var failed *messages.NodeRef
	// grace is how long the session keeps locating after a sender failed,
	// even if the Gets that asked have given up: the copy is worth
	// finishing. It is fixed when a sender first fails, not renewed on
	// every attempt, or a shard that keeps answering UNAVAILABLE would be
	// asked forever.
	var grace time.Time
	epoch, haveEpoch := uint64(0), false
	rewinds := 0
	backoff := 5 * time.Millisecond
	for {
		// Read each time: a later Get may have extended the deadline.
		deadline := later(time.Unix(0, f.deadline.Load()), grace)
		shard := f.cfg.ShardFor(id) // may have moved since the last attempt
		lctx, cancel := context.WithDeadline(ctx, deadline)
		res, err := actorutil.Request(lctx, system.Root, shard, &messages.Locate{ObjectId: id, Receiver: me,
			TimeoutMs: actorutil.TimeoutMs(lctx), FailedSender: failed, Naive: f.cfg.Naive})
		cancel()
		var loc *messages.LocateReply
		if err == nil {
			var ok bool
			if loc, ok = res.(*messages.LocateReply); !ok {
				err = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Locate", res)
			} else {
				err = messages.ErrOrNil(loc.GetError())
			}
		}
		if err != nil && ctx.Err() != nil {
			// Stopped while locating (the node restarts): the restarted
			// node resumes this fetch; its Gets keep waiting on the object.
			return messages.ErrCanceled
		}
		if err != nil {
			switch {
			case errors.Is(err, messages.ErrUnavailable) && time.Now().Before(deadline):
				// The shard is restarting or moving: its state comes back
				// from the store nodes, so ask again shortly.
				if sleep(ctx, backoff) == nil {
					backoff = min(2*backoff, 200*time.Millisecond)
					continue
				}
			case errors.Is(err, messages.ErrTimeout):
				system.Root.Send(shard, &messages.CancelLocate{ObjectId: id, Receiver: me})
				if time.Unix(0, f.deadline.Load()).After(deadline) && ctx.Err() == nil {
					continue // a later Get extended the deadline
				}
				err = messages.Errorf(messages.ErrorCode_TIMEOUT, "object %q: no location before the deadline", id)
			}
			return f.abort(system, err)
		}
		backoff = 5 * time.Millisecond
		if f.obj.Pinned() || loc.GetSender().GetNodeId() == me.GetNodeId() {
			return nil // a Put on this node took the object over
		}
		if loc.GetHasInline() {
			return f.storeInline(system, w, loc)
		}
		if f.obj.Size() < 0 {
			evicted, err := f.cfg.Store.Allocate(f.obj, loc.GetSize(), loc.GetFingerprint())
			if err != nil {
				system.Root.Send(shard, &messages.FetchAborted{ObjectId: id, Receiver: me, Sender: loc.GetSender()})
				return err
			}
			for _, e := range evicted {
				system.Root.Send(f.cfg.ShardFor(e), &messages.UnpublishLocation{ObjectId: e, Node: me})
			}
		} else if f.obj.Size() != loc.GetSize() {
			system.Root.Send(shard, &messages.FetchAborted{ObjectId: id, Receiver: me, Sender: loc.GetSender()})
			return f.abort(system, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: directory size %d, local size %d", id, loc.GetSize(), f.obj.Size()))
		}
		if haveEpoch && loc.GetEpoch() != epoch {
			// A Reduce re-created this object: what we have is stale.
			if err := w.Rewind(); err != nil {
				return f.superseded(system, err)
			}
		}
		epoch, haveEpoch = loc.GetEpoch(), true
		if failed != nil {
			system.EventStream.Publish(&events.SenderSwitched{Object: id, Receiver: me.GetNodeId(),
				From: failed.GetNodeId(), To: loc.GetSender().GetNodeId(), Offset: f.written()})
		}
		begin, from, chunk := time.Now(), f.written(), f.cfg.streamChunk()
		err = f.streamWatched(ctx, system, self, w, loc.GetSender(), chunk)
		switch {
		case err == nil:
			// Only a whole-enough transfer from a complete copy measures
			// the network rather than an upstream still arriving. The
			// threshold does not follow the chunk: a cluster of 1 MiB
			// objects with 1 MiB chunks must learn its bandwidth too.
			if moved := f.obj.Size() - from; f.cfg.Estimator != nil && loc.GetSenderState() == messages.LocationState_COMPLETE && moved >= netmodel.MinMeasuredTransfer {
				f.cfg.Estimator.ObserveTransfer(moved, time.Since(begin))
			}
			if err := f.cfg.Store.Complete(f.obj); err != nil {
				return err
			}
			system.Root.Send(f.cfg.ShardFor(id), &messages.FetchDone{ObjectId: id, Receiver: me, Sender: loc.GetSender(),
				Size: f.obj.Size(), Fingerprint: loc.GetFingerprint()})
			return nil
		case ctx.Err() != nil, errors.Is(err, messages.ErrCanceled):
			// Stopped (node restarting or stopping) or superseded by a
			// newer session: the bytes stay and the newer one goes on.
			return messages.ErrCanceled
		}
		if _, done, oerr := f.obj.Progress(); oerr != nil || done || f.obj.Pinned() {
			return oerr // dropped (deleted), or a local Put took over
		}
		if errors.Is(err, messages.ErrReset) && rewinds < maxRewinds {
			// The sender's copy was rewound (a Reduce upstream repaired its
			// tree): start over from the same sender; our own readers get
			// RESET in turn.
			rewinds++
			if rerr := w.Rewind(); rerr != nil {
				return f.superseded(system, rerr)
			}
			failed = nil
			continue
		}
		f.cfg.Log.WithFields(logrus.Fields{"object": id, "sender": loc.GetSender().GetNodeId(),
			"offset": f.written(), "error": err}).Info("sender failed; locating another")
		if grace.IsZero() {
			grace = time.Now().Add(f.cfg.StallTimeout)
		}
		failed = loc.GetSender()
	}
}

// streamWatched streams from sender while the session actor watches it.
func (f *fetchSession) streamWatched(ctx context.Context, system *actor.ActorSystem, self *actor.PID, w *Writer, sender *messages.NodeRef, chunk int) error {
	sctx, cut := context.WithCancel(ctx)
	defer cut()
	pid := sender.PID()
	system.Root.Send(self, &watchSender{pid: pid, cut: cut})
	defer system.Root.Send(self, &unwatchSender{pid: pid})
	err := f.stream(sctx, w, sender, chunk)
	if err != nil && sctx.Err() != nil && ctx.Err() == nil {
		return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender %s terminated", sender.GetNodeId())
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (f *fetchSession) written() int64 {
	w, _, _ := f.obj.Progress()
	return w
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// superseded handles a failed rewind: a newer session owns the object
// (it stays for that session's Gets) or the object is gone.
func (f *fetchSession) superseded(system *actor.ActorSystem, err error) error {
	if errors.Is(err, messages.ErrCanceled) {
		return messages.ErrCanceled
	}
	return f.abort(system, err)
}

// abort gives up: waiters see err and the directory forgets this copy.
func (f *fetchSession) abort(system *actor.ActorSystem, err error) error {
	if _, done, _ := f.obj.Progress(); done || f.obj.Pinned() {
		return nil // finished after all, or a Put on this node took over
	}
	f.cfg.Store.Abort(f.obj, err)
	system.Root.Send(f.cfg.ShardFor(f.obj.ID()), &messages.FetchAborted{ObjectId: f.obj.ID(), Receiver: f.cfg.Self})
	return err
}

func (f *fetchSession) storeInline(system *actor.ActorSystem, w *Writer, loc *messages.LocateReply) error {
	if _, err := f.cfg.Store.Allocate(f.obj, loc.GetSize(), loc.GetFingerprint()); err != nil {
		return err
	}
	if err := w.Append(loc.GetInlineData()); err != nil {
		// Superseded (the store node restarted and a newer session owns
		// the object): its waiters are that session's, not to be failed.
		return f.superseded(system, err)
	}
	if err := f.cfg.Store.Complete(f.obj); err != nil {
		return err
	}
	// Published so that a Delete reaches this cached copy too.
	system.Root.Send(f.cfg.ShardFor(f.obj.ID()), &messages.PublishLocation{ObjectId: f.obj.ID(), Node: f.cfg.Self,
		State: messages.LocationState_COMPLETE, Size: loc.GetSize(), Fingerprint: loc.GetFingerprint()})
	return nil
}

// stream copies the object from sender, starting at what is already here.
func (f *fetchSession) stream(ctx context.Context, w *Writer, sender *messages.NodeRef, chunk int) error {
	id := f.obj.ID()
	off, _, _ := f.obj.Progress()
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
func (f *fetchSession) streamInto(ctx context.Context, w *Writer, s transport.IntoStream, off int64) error {
	id := f.obj.ID()
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
