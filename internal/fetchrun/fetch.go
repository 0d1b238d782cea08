package fetchrun

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// Fetch runs a storeproto.FetchProtocol against the store: it reads the
// object's state for each input, carries out the store operations the
// protocol asks for (feeding their results back until it asks for none),
// hands a measured transfer to observe before the operation that
// completes the copy, and holds the object's writer that the streams
// write through. Its methods are the protocol's, without the object's
// state; the outputs it returns ask for no store operation. A fetch into
// a caller's buffer (NewFetchInto) has no object, and its protocol asks
// for none.
type Fetch struct {
	p       *storeproto.FetchProtocol
	proto   storeproto.FetchProtocol // what p points to: one allocation for both
	store   *objstore.Store
	obj     *objstore.Object
	w       *objstore.Writer
	observe func(bytes int64, elapsed time.Duration)
}

// NewFetch returns the fetch of obj, a placeholder reserved in store,
// wanted by Gets until deadline; observe, if set, takes each transfer
// that measured the network (the bandwidth estimator's
// ObserveTransfer).
func NewFetch(cfg storeproto.FetchConfig, store *objstore.Store, obj *objstore.Object, deadline time.Time, observe func(bytes int64, elapsed time.Duration)) *Fetch {
	f := &Fetch{proto: storeproto.MakeFetchProtocol(cfg, obj.ID(), deadline), store: store, obj: obj, observe: observe}
	f.p = &f.proto
	return f
}

// NewFetchInto returns the fetch of object id into a caller's buffer of
// capacity bytes (see storeproto.NewFetchIntoProtocol).
func NewFetchInto(cfg storeproto.FetchConfig, id string, capacity int64, deadline time.Time, observe func(bytes int64, elapsed time.Duration)) *Fetch {
	f := &Fetch{proto: storeproto.MakeFetchIntoProtocol(cfg, id, capacity, deadline), observe: observe}
	f.p = &f.proto
	return f
}

// Writer is the object's writer the streams write through (nil before
// the fetch started, and for a fetch into a caller's buffer).
func (f *Fetch) Writer() *objstore.Writer { return f.w }

// Protocol is the step machine this fetch runs.
func (f *Fetch) Protocol() *storeproto.FetchProtocol { return f.p }

// Start begins the fetch (storeproto.FetchStart).
func (f *Fetch) Start(now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchStart{State: f.state()}), now)
}

// Located takes the shard's answer to a Locate (storeproto.FetchLocated).
func (f *Fetch) Located(loc *messages.LocateReply, now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchLocated{Reply: loc, State: f.state()}), now)
}

// LocateFailed reports a Locate not asked or not answered
// (storeproto.FetchLocateFailed).
func (f *Fetch) LocateFailed(attempt uint64, err error, now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchLocateFailed{Attempt: attempt, Err: err, State: f.state()}), now)
}

// Timer takes back a timer the protocol armed (storeproto.FetchTimed).
func (f *Fetch) Timer(t storeproto.FetchTimer, now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchTimed{Timer: t, State: f.state()}), now)
}

// SenderFailed reports that a node failed (storeproto.FetchSenderFailed).
func (f *Fetch) SenderFailed(node string) storeproto.FetchOutput {
	return f.p.Step(time.Time{}, storeproto.FetchSenderFailed{Node: node})
}

// StreamEnded takes the end of the data plane's copy
// (storeproto.FetchStreamEnded).
func (f *Fetch) StreamEnded(stream uint64, err error, now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchStreamEnded{Stream: stream, Err: err, State: f.state()}), now)
}

// IntoStreamEnded is StreamEnded for a fetch into a caller's buffer
// (storeproto.FetchIntoStreamEnded).
func (f *Fetch) IntoStreamEnded(stream uint64, upTo int64, err error, now time.Time) storeproto.FetchOutput {
	return f.run(f.p.Step(now, storeproto.FetchIntoStreamEnded{Stream: stream, UpTo: upTo, Err: err}), now)
}

// Stop ends the fetch because its shell stops (storeproto.FetchStop).
func (f *Fetch) Stop() storeproto.FetchOutput { return f.p.Step(time.Time{}, storeproto.FetchStop{}) }

// Dropped ends the fetch because the directory dropped the copy (see
// storeproto.FetchDropped).
func (f *Fetch) Dropped() storeproto.FetchOutput {
	return f.p.Step(time.Time{}, storeproto.FetchDropped{})
}

// Extend moves the deadline to a later Get's.
func (f *Fetch) Extend(deadline time.Time) { f.p.Extend(deadline) }

// Done reports whether the fetch has ended.
func (f *Fetch) Done() bool { return f.p.Done() }

// Waiting reports what bounds the fetch's current wait
// (storeproto.FetchProtocol.Waiting).
func (f *Fetch) Waiting() string { return f.p.Waiting() }

// Sender is the node currently streamed from (nil when not streaming).
func (f *Fetch) Sender() *messages.NodeRef { return f.p.Sender() }

// String describes the fetch's state for logs and failing tests.
func (f *Fetch) String() string { return f.p.String() }

// state reads the object's state at one instant (the zero state for a
// fetch into a caller's buffer, which has no object).
func (f *Fetch) state() storeproto.ObjectState {
	if f.obj == nil {
		return storeproto.ObjectState{Size: -1}
	}
	size, written, done, pinned, err := f.obj.State()
	return storeproto.ObjectState{Size: size, Written: written, Done: done, Err: err, Pinned: pinned}
}

// run carries out out's store operations, and those of the steps they
// continue, and returns everything else they asked for, in order.
func (f *Fetch) run(out storeproto.FetchOutput, now time.Time) storeproto.FetchOutput {
	for {
		if m := out.Measured; m != nil {
			out.Measured = nil
			if f.observe != nil {
				f.observe(m.Bytes, m.Elapsed)
			}
		}
		op := out.Store
		if op.Kind == 0 {
			break
		}
		out.Store = storeproto.StoreOp{}
		r := f.apply(&op)
		out.Then(f.p.Step(now, storeproto.FetchStoreDone{Result: r, State: f.state()}))
	}
	return out
}

// apply carries out one store operation.
func (f *Fetch) apply(op *storeproto.StoreOp) storeproto.StoreResult {
	switch op.Kind {
	case storeproto.OpTakeWriter:
		f.w = f.obj.NewWriter()
	case storeproto.OpAllocate:
		if op.Reading != "" {
			f.obj.MarkReading(op.Reading)
		}
		evicted, err := f.store.Allocate(f.obj, op.Size, op.Fingerprint)
		return storeproto.StoreResult{Err: err, Evicted: evicted}
	case storeproto.OpRewind:
		return storeproto.StoreResult{Err: f.w.Rewind()}
	case storeproto.OpStoreInline:
		evicted, err := f.store.Allocate(f.obj, op.Size, op.Fingerprint)
		if err != nil {
			return storeproto.StoreResult{Err: err}
		}
		// The answer's bytes become the object's: decoded where the data
		// plane received them (or the shard's own, in process), never
		// written again.
		if err := f.w.Adopt(op.Data); err != nil {
			return storeproto.StoreResult{Err: err, AppendFailed: true, Evicted: evicted}
		}
		markRun(f.obj, op)
		return storeproto.StoreResult{Err: f.store.Complete(f.obj), Evicted: evicted}
	case storeproto.OpComplete:
		markRun(f.obj, op)
		return storeproto.StoreResult{Err: f.store.Complete(f.obj)}
	case storeproto.OpAbort:
		f.store.Abort(f.obj, op.Err)
	}
	return storeproto.StoreResult{}
}

// markRun records on o the Reduce run that committed it (op.Run), before
// o completes: a copy that names a run already (the root's, a gather's,
// an AllReduce participant's marked by its coordinator) keeps it.
func markRun(o *objstore.Object, op *storeproto.StoreOp) {
	if op.Run != "" {
		o.MarkRun(op.Run, op.Reduced)
	}
}

// Step is the fetch as a core: it steps the protocol with ev at now,
// the store's state filled in, and runs the store operations the step
// asks for. ev is storeproto.FetchStart, FetchLocated, FetchLocateFailed,
// FetchStreamEnded, FetchIntoStreamEnded, FetchSenderFailed, FetchStop,
// FetchDropped (their State, if any, is read here), or the protocol's
// own FetchTimer coming back. The shard's answer itself, a
// *messages.LocateReply, is FetchLocated too: a pointer goes into an
// interface without an allocation, and every Get steps a Locate's answer.
// Any other event asks for nothing.
func (f *Fetch) Step(now time.Time, ev any) storeproto.FetchOutput {
	switch e := ev.(type) {
	case storeproto.FetchStart:
		return f.Start(now)
	case storeproto.FetchLocated:
		return f.Located(e.Reply, now)
	case *messages.LocateReply:
		return f.Located(e, now)
	case storeproto.FetchLocateFailed:
		return f.LocateFailed(e.Attempt, e.Err, now)
	case storeproto.FetchTimer:
		return f.Timer(e, now)
	case storeproto.FetchStreamEnded:
		return f.StreamEnded(e.Stream, e.Err, now)
	case storeproto.FetchIntoStreamEnded:
		return f.IntoStreamEnded(e.Stream, e.UpTo, e.Err, now)
	case storeproto.FetchSenderFailed:
		return f.SenderFailed(e.Node)
	case storeproto.FetchStop:
		return f.Stop()
	case storeproto.FetchDropped:
		return f.Dropped()
	}
	return storeproto.FetchOutput{}
}
