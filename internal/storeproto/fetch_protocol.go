package storeproto

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/netmodel"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// FetchConfig is what the fetch protocol needs of its node.
type FetchConfig struct {
	// Self is the receiving node.
	Self *messages.NodeRef
	// Grace is how long the protocol keeps locating after a sender first
	// failed, even past the Gets' deadline (the StallTimeout).
	Grace time.Duration
	// Rand jitters the retry backoff; seeded by the caller (no global
	// source, so a simulation replays exactly).
	Rand *rand.Rand
	// FirstAttempt numbers the Locates from FirstAttempt+1 on. A shell
	// whose answers can reach it from another fetch of the same object
	// (they share one reply address) starts each fetch at its own.
	FirstAttempt uint64
}

// FetchTimerKind tells which wait a FetchTimer ends.
type FetchTimerKind int

const (
	// TimerRetry ends a backoff after the shard answered UNAVAILABLE.
	TimerRetry FetchTimerKind = iota + 1
	// TimerLocateDeadline ends a Locate the shard did not answer in time.
	TimerLocateDeadline
)

// FetchTimer is what the protocol asks to be handed back (through
// outbox.Timer) when a wait ends. A timer of an attempt that is over is
// ignored, so the shell never needs to cancel one.
type FetchTimer struct {
	Attempt uint64
	Kind    FetchTimerKind
}

// StreamCommand asks the data plane to copy the object from Sender,
// starting at Offset, through the object's writer (which the Fetch that
// carries out the protocol's store operations holds: Fetch.Writer), and
// to report the end with StreamEnded(ID, ...). A fetch into a caller's
// buffer has no writer: the copy goes to the buffer's bytes [Offset,
// Size) and reports its end with IntoStreamEnded(ID, ...).
type StreamCommand struct {
	ID     uint64
	Sender *messages.NodeRef
	Offset int64
	Size   int64
	// Chunk, if > 0, is the largest chunk the stream should move in: the
	// one the shard chose for the broadcast tree's depth
	// (LocateReply.chunk).
	Chunk int64
}

// SenderFailure says a sender failed mid-transfer and the protocol locates
// another (an event, for the shell's log).
type SenderFailure struct {
	Sender *messages.NodeRef
	Offset int64
	Err    error
}

// ObjectState is what the protocol knows of the object it fetches into
// the store, read by the shell before each step and after each store
// operation: the protocol holds no object.
type ObjectState struct {
	// Size is the object's size, -1 until it is allocated.
	Size int64
	// Written is how many of its bytes are here; Done, that all are;
	// Err, that it was dropped (deleted) or failed.
	Written int64
	Done    bool
	Err     error
	// Pinned: a creator on this node (a Put, a Reduce's root) holds it.
	Pinned bool
}

// StoreOpKind names a store operation the protocol asks for.
type StoreOpKind int

const (
	// OpTakeWriter takes the object's writer, which cuts off an older
	// session's copy: a chunk it still holds cannot land.
	OpTakeWriter StoreOpKind = iota + 1
	// OpAllocate gives the placeholder its Size and Fingerprint, evicting
	// other objects to make room (StoreResult.Evicted).
	OpAllocate
	// OpRewind drops the bytes fetched so far: their contents changed.
	OpRewind
	// OpStoreInline allocates Size bytes, appends Data and completes the
	// object, in one.
	OpStoreInline
	// OpComplete marks the object complete.
	OpComplete
	// OpAbort fails the object with Err: its waiters see it.
	OpAbort
)

// StoreOp is a store operation a step asks its shell to carry out before
// anything else of the step's output. Its result comes back with
// StoreDone, unless the protocol ended with the step (OpAbort).
type StoreOp struct {
	Kind        StoreOpKind
	Size        int64
	Fingerprint uint64
	Data        []byte
	Err         error
	// Reading, on OpAllocate, is the running Reduce whose uncommitted
	// target the copy streams (LocateReply.reduce_id; see
	// objstore.Object.MarkReading).
	Reading string
	// Run and Reduced, on OpComplete and OpStoreInline, are the Reduce
	// run that committed the object and the sources it reduces, as its
	// shard answered them (LocateReply.produced_by): the copy records
	// them unless it names a run already (objstore.Object.SetProducer),
	// so that its republication does too.
	Run     string
	Reduced []string
}

// StoreResult is the outcome of a StoreOp: Err if it failed (for
// OpStoreInline, AppendFailed if the append did, which means a newer
// session owns the object), and what an allocation evicted.
type StoreResult struct {
	Err          error
	AppendFailed bool
	Evicted      []string
}

// Measurement is a transfer that measured the network, for the
// bandwidth estimator. The shell takes it before the step's store
// operation: a Get answered at completion then finds it already there.
type Measurement struct {
	Bytes   int64
	Elapsed time.Duration
}

// FetchOutput is what one step of the fetch protocol asks of its shell.
// The Box holds the directory messages (To is a ShardOf), the timers
// (Msg is a FetchTimer), the sender to watch or unwatch (a
// *messages.NodeRef, whose failure comes back with SenderFailed) and the
// events (*events.SenderSwitched when the copy resumes from a new sender,
// *SenderFailure when the protocol recovers from one); the other fields
// are store and data-plane commands that are not messages.
type FetchOutput struct {
	outbox.Box
	// Store is a store operation (none if its Kind is 0), carried out
	// first; its result comes back with StoreDone. A value, not a
	// pointer: an inline Get's steps allocate nothing for it.
	Store StoreOp
	// Measured is a transfer that measured the network.
	Measured *Measurement
	// Stream starts a copy; Cut ends the copy with that id early (its
	// end is still reported).
	Stream *StreamCommand
	Cut    uint64
	// Done: the protocol ended with Err (nil: the object is here, or a
	// Put on this node took it over). No further step does anything.
	Done bool
	Err  error
	// For a fetch into a caller's buffer, a Done without Err says how it
	// ended: Local, the object is on this node after all (its own Put
	// took it over, or a Get brought a whole copy) and is read from the
	// store; Inline, the object's bytes came with the directory's answer
	// (the shell copies them into the buffer); otherwise the buffer holds
	// all Size bytes of it.
	Local  bool
	Inline []byte
	Size   int64
}

// Switched is the step's SenderSwitched event, if any.
func (o *FetchOutput) Switched() *events.SenderSwitched {
	for _, e := range o.Events {
		if s, ok := e.(*events.SenderSwitched); ok {
			return s
		}
	}
	return nil
}

// Failure is the step's SenderFailure event, if any.
func (o *FetchOutput) Failure() *SenderFailure {
	for _, e := range o.Events {
		if f, ok := e.(*SenderFailure); ok {
			return f
		}
	}
	return nil
}

// Then appends the output of the step that continues this one (after a
// store operation): its box after this one's, its commands in place of
// this one's.
func (o *FetchOutput) Then(n FetchOutput) {
	if o.Box.Empty() {
		o.Box = n.Box // n is the caller's to drop: no copy of its slices
	} else {
		o.Merge(n.Box)
	}
	o.Store, o.Measured = n.Store, n.Measured
	if n.Stream != nil {
		o.Stream = n.Stream
	}
	if n.Cut != 0 {
		o.Cut = n.Cut
	}
	if n.Done {
		o.Done, o.Err, o.Local, o.Inline, o.Size = true, n.Err, n.Local, n.Inline, n.Size
	}
}

type fetchPhase int

const (
	phaseIdle fetchPhase = iota
	phaseLocating
	phaseBackoff
	phaseStreaming
	phaseStoring // waiting for StoreDone
	phaseDone
)

// storeNext says what the protocol does with a StoreResult.
type storeNext int

const (
	nextNone storeNext = iota
	nextStarted
	nextAllocated
	nextRewoundStale
	nextRewoundInline
	nextInlineStored
	nextCompleted
	nextRewoundReset
)

const (
	firstBackoff = 5 * time.Millisecond
	maxBackoff   = 200 * time.Millisecond
)

// maxRewinds bounds how often one fetch starts over because its source
// was rewound (each rewind is a repair of a Reduce upstream).
const maxRewinds = 64

// FetchProtocol brings one object to this node, as a pure step machine:
// it asks the directory for a sender, streams from it (through the data
// plane, which the shell runs), and when the sender fails asks again
// (naming the failed one) and resumes at its current offset. Each input
// takes now (and the object's state) and returns a FetchOutput; it reads
// no clock, starts no goroutine and touches no store: what it asks of the
// store is a StoreOp in its output, whose result comes back with
// StoreDone (Fetch carries them out).
//
// Every state waits with a bound: locating by a timer at the Locate's
// deadline (the shard answers by then too), backing off by its retry
// timer, streaming by the data plane's stall timeout per chunk.
type FetchProtocol struct {
	cfg FetchConfig
	id  string
	// st is the object's state as of the last input.
	st ObjectState
	// next is what a StoreDone continues with; loc the answer it
	// continues.
	next storeNext
	loc  *messages.LocateReply

	phase fetchPhase
	// deadline is the latest deadline of the Gets that wait for the
	// object; later Gets extend it.
	deadline time.Time
	// grace is fixed when a sender first fails, not renewed on every
	// attempt, or a shard that keeps answering UNAVAILABLE would be
	// asked forever.
	grace time.Time
	// locDeadline is the current Locate's deadline.
	locDeadline time.Time
	attempt     uint64
	backoff     time.Duration
	failed      *messages.NodeRef
	// failedLacks: failed answered NOT_FOUND (Locate.failed_sender_lacks).
	failedLacks bool
	epoch       uint64
	haveEpoch   bool
	rewinds     int

	// The current stream.
	stream      uint64
	sender      *messages.NodeRef
	senderState messages.LocationState
	fingerprint uint64
	begin       time.Time
	from        int64
	senderGone  bool // cut because the sender terminated
	// run and reduced are the latest answer's LocateReply.produced_by and
	// reduced_ids (see StoreOp.Run).
	run     string
	reduced []string

	// into is set for a fetch into a caller's buffer of capacity bytes
	// (NewFetchIntoProtocol): there is no object, size is the object's
	// size once known (-1 before), and have is how many of its bytes the
	// buffer holds, in order from 0, of the epoch streamed.
	into     bool
	capacity int64
	size     int64
	have     int64
}

// NewFetchProtocol returns the protocol for object id, a placeholder
// reserved in the store, wanted by Gets until deadline.
func NewFetchProtocol(cfg FetchConfig, id string, deadline time.Time) *FetchProtocol {
	p := MakeFetchProtocol(cfg, id, deadline)
	return &p
}

// MakeFetchProtocol is NewFetchProtocol as a value, for a shell that
// holds the protocol in its own allocation (fetchrun.Fetch).
func MakeFetchProtocol(cfg FetchConfig, id string, deadline time.Time) FetchProtocol {
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(deadline.UnixNano()), 0))
	}
	return FetchProtocol{cfg: cfg, id: id, deadline: deadline, backoff: firstBackoff, attempt: cfg.FirstAttempt}
}

// NewFetchIntoProtocol returns the protocol for a fetch of object id into
// a caller's buffer of capacity bytes (Client.GetInto) instead of into
// the store: the node keeps no copy, so its Locates say no_copy (the
// directory neither records this node as a location nor claims a sender
// for it), nothing is published, allocated or told to the directory when
// it ends, and a failed sender's replacement resumes at the bytes the
// buffer already holds (IntoStreamEnded reports them). It starts locating
// at once: the shell reads a local copy itself before it starts one.
func NewFetchIntoProtocol(cfg FetchConfig, id string, capacity int64, deadline time.Time) *FetchProtocol {
	p := MakeFetchIntoProtocol(cfg, id, capacity, deadline)
	return &p
}

// MakeFetchIntoProtocol is NewFetchIntoProtocol as a value.
func MakeFetchIntoProtocol(cfg FetchConfig, id string, capacity int64, deadline time.Time) FetchProtocol {
	if cfg.Rand == nil {
		cfg.Rand = rand.New(rand.NewPCG(uint64(deadline.UnixNano()), 1))
	}
	return FetchProtocol{cfg: cfg, id: id, deadline: deadline, backoff: firstBackoff, into: true, capacity: capacity, size: -1}
}

// Done reports whether the protocol has ended.
func (p *FetchProtocol) Done() bool { return p.phase == phaseDone }

// Waiting reports what bounds the protocol's current wait: "locate" and
// "backoff" are bounded by a timer it armed, "stream" by the data plane's
// stall timeout, "" means it is not waiting (not started or done).
func (p *FetchProtocol) Waiting() string {
	switch p.phase {
	case phaseLocating:
		return "locate"
	case phaseBackoff:
		return "backoff"
	case phaseStreaming:
		return "stream"
	case phaseStoring:
		return "store"
	}
	return ""
}

// Attempt numbers the protocol's last Locate.
func (p *FetchProtocol) Attempt() uint64 { return p.attempt }

// Deadline is the Gets' latest deadline.
func (p *FetchProtocol) Deadline() time.Time { return p.deadline }

// Stream is the id of the protocol's last copy (0 before the first).
func (p *FetchProtocol) Stream() uint64 { return p.stream }

// Sender is the node currently streamed from (nil when not streaming).
func (p *FetchProtocol) Sender() *messages.NodeRef {
	if p.phase != phaseStreaming {
		return nil
	}
	return p.sender
}

// onStart begins the fetch. Taking the writer first cuts off a session this
// one resumes from: its copy may still hold a chunk, which now cannot land.
func (p *FetchProtocol) onStart(st ObjectState, now time.Time) FetchOutput {
	var out FetchOutput
	if p.phase != phaseIdle {
		return out
	}
	p.st = st
	if p.into {
		p.locate(&out, now)
		return out
	}
	if st.Pinned {
		// A creator on this node (a Put, or a Reduce's root) took the
		// placeholder before this session began, and fills it itself: the
		// Gets wait for it to settle. Taking the writer would cut the
		// creator off (a root then waited for a repair that never came:
		// TestAbandonedGatherLeavesTheNewRunsGetAlone, once in ~150 runs).
		return p.finish(out, nil)
	}
	return p.store(out, StoreOp{Kind: OpTakeWriter}, nextStarted, nil)
}

// store asks for op and waits for its result, which continues with next
// (and loc).
func (p *FetchProtocol) store(out FetchOutput, op StoreOp, next storeNext, loc *messages.LocateReply) FetchOutput {
	p.phase, p.next, p.loc = phaseStoring, next, loc
	out.Store = op
	return out
}

// onStoreDone takes the result of the last step's store operation and the
// object's state after it, and goes on from where that step stopped.
func (p *FetchProtocol) onStoreDone(r StoreResult, st ObjectState, now time.Time) FetchOutput {
	var out FetchOutput
	if p.phase != phaseStoring {
		return out
	}
	p.st = st
	next, loc := p.next, p.loc
	p.next, p.loc = nextNone, nil
	me := p.cfg.Self
	switch next {
	case nextStarted:
		if st.Done || st.Err != nil {
			return p.finish(out, st.Err) // finished (or dropped) before this session began
		}
		p.locate(&out, now)
		return out
	case nextAllocated:
		if r.Err != nil {
			// Allocate failed and dropped the placeholder already.
			out.Send(directory.ShardOf(p.id), &messages.FetchAborted{ObjectId: p.id, Receiver: me, Sender: loc.GetSender()})
			return p.finish(out, r.Err)
		}
		for _, e := range r.Evicted {
			out.Send(directory.ShardOf(e), &messages.UnpublishLocation{ObjectId: e, Node: me})
		}
		return p.allocated(out, loc, now)
	case nextRewoundStale:
		if r.Err != nil {
			return p.superseded(out, r.Err)
		}
		return p.streamFrom(out, loc, now)
	case nextRewoundInline:
		if r.Err != nil {
			return p.superseded(out, r.Err)
		}
		return p.storeInline(out, loc)
	case nextInlineStored:
		for _, e := range r.Evicted {
			// As after an allocation: the copies it evicted to make room
			// leave the directory, which would offer them otherwise.
			out.Send(directory.ShardOf(e), &messages.UnpublishLocation{ObjectId: e, Node: me})
		}
		switch {
		case r.Err == nil:
			return p.finish(out, nil)
		case r.AppendFailed:
			// Superseded (the store node restarted and a newer session
			// owns the object): its waiters are that session's, not to
			// be failed.
			return p.superseded(out, r.Err)
		}
		out.Send(directory.ShardOf(p.id), &messages.UnpublishLocation{ObjectId: p.id, Node: me})
		return p.finish(out, r.Err)
	case nextCompleted:
		if r.Err != nil {
			return p.finish(out, r.Err)
		}
		out.Send(directory.ShardOf(p.id), &messages.FetchDone{ObjectId: p.id, Receiver: me, Sender: p.sender,
			Size: st.Size, Fingerprint: p.fingerprint, Epoch: p.epoch, Run: p.run})
		return p.finish(out, nil)
	case nextRewoundReset:
		if r.Err != nil {
			return p.superseded(out, r.Err)
		}
		p.failed = nil
		p.locate(&out, now)
		return out
	}
	return out
}

// Extend moves the deadline to a later Get's. A Locate in flight keeps its
// own deadline; when it times out, the protocol asks again.
func (p *FetchProtocol) Extend(deadline time.Time) {
	if deadline.After(p.deadline) {
		p.deadline = deadline
	}
}

// onLocated takes the shard's answer to a Locate. An answer to an attempt
// that is over (late, duplicated) changes nothing.
func (p *FetchProtocol) onLocated(loc *messages.LocateReply, st ObjectState, now time.Time) FetchOutput {
	var out FetchOutput
	if p.phase != phaseLocating || loc.GetAttempt() != p.attempt {
		return out
	}
	p.st = st
	if err := messages.ErrOrNil(loc.GetError()); err != nil {
		p.locateFailed(&out, err, now)
		return out
	}
	p.backoff = firstBackoff
	me := p.cfg.Self
	if p.into {
		return p.locatedInto(out, loc, now)
	}
	if own := loc.GetSender().GetNodeId() == me.GetNodeId(); own && !st.Pinned && !st.Done && st.Err == nil {
		// The directory lists this node's own whole copy, which its store
		// does not hold (a Put here takes the fetch's placeholder over
		// before it publishes, so that is not it): the record is stale.
		// It goes, and the fetch asks again. Answered with an error,
		// the Get failed with "already holds" while other copies lived.
		out.Send(directory.ShardOf(p.id), &messages.UnpublishLocation{ObjectId: p.id, Node: me})
		p.locateFailed(&out, messages.Errorf(messages.ErrorCode_UNAVAILABLE,
			"the directory lists a whole copy of %q on this node, which does not hold it", p.id), now)
		return out
	} else if st.Pinned || own {
		return p.finish(out, nil) // a Put on this node took the object over
	}
	if p.senderless(&out, loc, now) {
		return out
	}
	if loc.GetHasInline() {
		if st.Written > 0 {
			// Part of the object streamed from a copy the shard named
			// (an inline object relayed past its uplink's budget) whose
			// sender failed: the answer's bytes are all of it and
			// replace those (they are adopted, not appended), whose
			// readers start over.
			return p.store(out, StoreOp{Kind: OpRewind}, nextRewoundInline, loc)
		}
		return p.storeInline(out, loc)
	}
	if st.Size < 0 {
		return p.store(out, StoreOp{Kind: OpAllocate, Size: loc.GetSize(), Fingerprint: loc.GetFingerprint(), Reading: loc.GetReduceId()}, nextAllocated, loc)
	} else if st.Size != loc.GetSize() {
		out.Send(directory.ShardOf(p.id), &messages.FetchAborted{ObjectId: p.id, Receiver: me, Sender: loc.GetSender()})
		return p.abort(out, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: directory size %d, local size %d", p.id, loc.GetSize(), st.Size))
	}
	return p.allocated(out, loc, now)
}

// senderless fails the Locate of an answer that carries no error, no
// bytes and no sender with a node id, as a shard that could not answer
// (UNAVAILABLE: asked again after a backoff), and reports whether it
// did. No shard answers so; streamed, it opened a stream from nobody.
func (p *FetchProtocol) senderless(out *FetchOutput, loc *messages.LocateReply, now time.Time) bool {
	if loc.GetHasInline() || loc.GetSender().GetNodeId() != "" {
		return false
	}
	p.locateFailed(out, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory's answer for %q names no sender and carries no bytes", p.id), now)
	return true
}

// storeInline stores the bytes of loc, an inline answer. The shard
// recorded this node's copy when it answered (LocationTable.inlineReply),
// so nothing is published on success; a copy that could not be stored is
// unpublished.
func (p *FetchProtocol) storeInline(out FetchOutput, loc *messages.LocateReply) FetchOutput {
	return p.store(out, StoreOp{Kind: OpStoreInline, Size: loc.GetSize(), Fingerprint: loc.GetFingerprint(), Data: loc.GetInlineData(),
		Run: loc.GetProducedBy(), Reduced: loc.GetReducedIds()}, nextInlineStored, nil)
}

// allocated goes on with loc once the object has its size: bytes of
// other contents are dropped first.
func (p *FetchProtocol) allocated(out FetchOutput, loc *messages.LocateReply, now time.Time) FetchOutput {
	if p.stale(loc) {
		// A Reduce re-created this object: what we have is stale.
		return p.store(out, StoreOp{Kind: OpRewind}, nextRewoundStale, loc)
	}
	return p.streamFrom(out, loc, now)
}

// streamFrom streams from loc's sender from what is here on.
func (p *FetchProtocol) streamFrom(out FetchOutput, loc *messages.LocateReply, now time.Time) FetchOutput {
	p.epoch, p.haveEpoch = loc.GetEpoch(), true
	p.startStream(&out, loc, p.written(), now)
	return out
}

// stale reports whether the bytes fetched so far are of other contents
// than loc's sender holds: the shard's table issued loc's epoch after the
// one they were fetched under. An epoch of another table (the shard
// started over since) keeps them: contents change only with every copy
// the directory knows, this one among them, which it drops.
func (p *FetchProtocol) stale(loc *messages.LocateReply) bool {
	return p.haveEpoch && loc.GetEpoch() != p.epoch && directory.SameTable(loc.GetEpoch(), p.epoch)
}

// startStream streams from loc's sender from offset written on.
func (p *FetchProtocol) startStream(out *FetchOutput, loc *messages.LocateReply, written int64, now time.Time) {
	if p.failed != nil {
		out.Emit(&events.SenderSwitched{Object: p.id, Receiver: p.cfg.Self.GetNodeId(),
			From: p.failed.GetNodeId(), To: loc.GetSender().GetNodeId(), Offset: written})
	}
	p.stream++
	p.phase = phaseStreaming
	p.sender, p.senderState, p.fingerprint = loc.GetSender(), loc.GetSenderState(), loc.GetFingerprint()
	if loc.GetProducedBy() != "" {
		p.run, p.reduced = loc.GetProducedBy(), loc.GetReducedIds()
	}
	p.begin, p.from, p.senderGone = now, written, false
	out.WatchFor(p.sender)
	out.Stream = &StreamCommand{ID: p.stream, Sender: p.sender, Offset: written, Size: loc.GetSize(), Chunk: loc.GetChunk()}
}

// locatedInto is Located for a fetch into a caller's buffer.
func (p *FetchProtocol) locatedInto(out FetchOutput, loc *messages.LocateReply, now time.Time) FetchOutput {
	if loc.GetSender().GetNodeId() == p.cfg.Self.GetNodeId() {
		out.Local = true // the directory says this node holds it: the store has it
		return p.finish(out, nil)
	}
	if p.senderless(&out, loc, now) {
		return out
	}
	size := loc.GetSize()
	switch {
	case size < 0:
		return p.finish(out, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: the directory says its size is %d", p.id, size))
	case size > p.capacity:
		return p.finish(out, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
			"object %q is %d bytes; the buffer holds only %d", p.id, size, p.capacity))
	case p.size >= 0 && size != p.size:
		return p.finish(out, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: directory size %d, earlier %d", p.id, size, p.size))
	}
	p.size = size
	if loc.GetHasInline() {
		if int64(len(loc.GetInlineData())) != size {
			return p.finish(out, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: %d inline bytes for size %d", p.id, len(loc.GetInlineData()), size))
		}
		out.Inline, out.Size = loc.GetInlineData(), size
		return p.finish(out, nil)
	}
	if p.stale(loc) {
		p.have = 0 // a Reduce re-created the object: the bytes held are stale
	}
	p.epoch, p.haveEpoch = loc.GetEpoch(), true
	p.startStream(&out, loc, p.have, now)
	return out
}

// onLocateFailed reports that a Locate could not be asked or answered (no
// shard, the shard stopped: UNAVAILABLE). A failure of an attempt that
// is over changes nothing.
func (p *FetchProtocol) onLocateFailed(attempt uint64, err error, st ObjectState, now time.Time) FetchOutput {
	var out FetchOutput
	if p.phase != phaseLocating || attempt != p.attempt {
		return out
	}
	p.st = st
	p.locateFailed(&out, err, now)
	return out
}

// onTimer takes back a timer the protocol armed.
func (p *FetchProtocol) onTimer(t FetchTimer, st ObjectState, now time.Time) FetchOutput {
	var out FetchOutput
	if t.Attempt != p.attempt {
		return out
	}
	p.st = st
	switch {
	case t.Kind == TimerRetry && p.phase == phaseBackoff:
		p.locate(&out, now)
	case t.Kind == TimerLocateDeadline && p.phase == phaseLocating:
		p.locateFailed(&out, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from the directory shard of %q before the deadline", p.id), now)
	}
	return out
}

// onSenderFailed reports that a node failed (its actor terminated). If it
// is the current sender, the stream is cut; its end, reported as usual,
// then counts as the sender's failure.
func (p *FetchProtocol) onSenderFailed(node string) FetchOutput {
	var out FetchOutput
	if p.phase != phaseStreaming || p.sender.GetNodeId() != node || p.senderGone {
		return out
	}
	p.senderGone = true
	out.Cut = p.stream
	return out
}

// onStreamEnded takes the end of the data plane's copy: err nil means every
// byte arrived. An end of a stream that is over changes nothing.
func (p *FetchProtocol) onStreamEnded(stream uint64, err error, st ObjectState, now time.Time) FetchOutput {
	p.st = st
	return p.streamEnded(stream, 0, err, now)
}

// onIntoStreamEnded is StreamEnded for a fetch into a caller's buffer:
// upTo is how far the buffer holds the object's bytes now (a sender that
// failed is replaced from there), err nil that it holds them all.
func (p *FetchProtocol) onIntoStreamEnded(stream uint64, upTo int64, err error, now time.Time) FetchOutput {
	return p.streamEnded(stream, upTo, err, now)
}

func (p *FetchProtocol) streamEnded(stream uint64, upTo int64, err error, now time.Time) FetchOutput {
	var out FetchOutput
	if p.phase != phaseStreaming || stream != p.stream {
		return out
	}
	out.UnwatchFor(p.sender)
	if err != nil && p.senderGone && !errors.Is(err, messages.ErrReset) {
		err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender %s terminated", p.sender.GetNodeId())
	}
	if p.into {
		if upTo < p.from || upTo > p.size {
			return p.finish(out, messages.Errorf(messages.ErrorCode_INTERNAL, "object %q: a stream from %d ended at %d of %d", p.id, p.from, upTo, p.size))
		}
		p.have = upTo
		if err == nil && upTo != p.size {
			err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q: the stream from %s ended at %d of %d bytes", p.id, p.sender.GetNodeId(), upTo, p.size)
		}
	}
	switch {
	case err == nil:
		// Only a whole-enough transfer from a complete copy measures the
		// network rather than an upstream still arriving. The threshold
		// does not follow the chunk: a cluster of 1 MiB objects with
		// 1 MiB chunks must learn its bandwidth too.
		if moved := p.objectSize() - p.from; p.senderState == messages.LocationState_COMPLETE && moved >= netmodel.MinMeasuredTransfer {
			out.Measured = &Measurement{Bytes: moved, Elapsed: now.Sub(p.begin)}
		}
		if p.into {
			out.Size = p.size
			return p.finish(out, nil)
		}
		return p.store(out, StoreOp{Kind: OpComplete, Run: p.run, Reduced: p.reduced}, nextCompleted, nil)
	case errors.Is(err, messages.ErrCanceled) && !p.into:
		// Superseded by a newer session: the bytes stay and it goes on.
		// (A fetch into a caller's buffer has no such successor: a caller
		// that gave up stops it with Stop, so a cancellation that comes
		// here is the sender's, and another sender is asked for.)
		return p.finish(out, messages.ErrCanceled)
	}
	if !p.into {
		if p.st.Err != nil || p.st.Done || p.st.Pinned {
			return p.finish(out, p.st.Err) // dropped (deleted), or a local Put took over
		}
	}
	if errors.Is(err, messages.ErrReset) && p.rewinds < maxRewinds {
		// The sender's copy was rewound (a Reduce upstream repaired its
		// tree): start over; our own readers get RESET in turn.
		p.rewinds++
		if !p.into {
			return p.store(out, StoreOp{Kind: OpRewind}, nextRewoundReset, nil)
		}
		p.have = 0
		p.failed = nil
		p.locate(&out, now)
		return out
	}
	out.Emit(&SenderFailure{Sender: p.sender, Offset: p.written(), Err: err})
	if p.grace.IsZero() {
		p.grace = now.Add(p.cfg.Grace)
	}
	p.failed, p.failedLacks = p.sender, errors.Is(err, messages.ErrNotFound) && !p.senderGone
	p.locate(&out, now)
	return out
}

// onStop ends the protocol because its session stops (the node restarts or
// stops): the bytes stay and the restarted node resumes the fetch, so the
// directory is not told anything.
func (p *FetchProtocol) onStop() FetchOutput {
	var out FetchOutput
	if p.phase == phaseDone {
		return out
	}
	if p.phase == phaseStreaming {
		out.Cut = p.stream
		out.UnwatchFor(p.sender)
	}
	return p.finish(out, messages.ErrCanceled)
}

// onDropped ends the protocol because the directory dropped the object's
// copy here (DropObject). The shard may still record this node as the
// receiver of the current attempt, holding a sender for it: the Locate's
// answer may be on its way, since the drop travels another way and can
// overtake it. The shard is told, naming the attempt, so that it frees
// that claim and no later one.
func (p *FetchProtocol) onDropped() FetchOutput {
	claimed := !p.into && (p.phase == phaseStreaming || p.phase == phaseLocating)
	sender := p.sender
	if p.phase == phaseLocating {
		sender = nil // the answer, if any, names it; the shard knows
	}
	out := p.onStop()
	if claimed {
		out.Send(directory.ShardOf(p.id), &messages.FetchAborted{ObjectId: p.id, Receiver: p.cfg.Self, Sender: sender, Attempt: p.attempt})
	}
	return out
}

// locate asks the shard for a sender, with a timer at the Locate's
// deadline: the shard answers TIMEOUT by then, and the timer bounds the
// wait if its answer is lost.
func (p *FetchProtocol) locate(out *FetchOutput, now time.Time) {
	p.attempt++
	p.phase = phaseLocating
	p.locDeadline = later(p.deadline, p.grace)
	if !now.Before(p.locDeadline) {
		p.locateFailed(out, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the Locate was sent"), now)
		return
	}
	out.Send(directory.ShardOf(p.id), &messages.Locate{ObjectId: p.id, Receiver: p.cfg.Self,
		TimeoutMs: max(1, p.locDeadline.Sub(now).Milliseconds()), FailedSender: p.failed, FailedSenderLacks: p.failed != nil && p.failedLacks,
		Attempt: p.attempt, NoCopy: p.into})
	out.After(p.locDeadline, FetchTimer{Attempt: p.attempt, Kind: TimerLocateDeadline})
}

func (p *FetchProtocol) locateFailed(out *FetchOutput, err error, now time.Time) {
	switch {
	case errors.Is(err, messages.ErrUnavailable) && now.Before(p.locDeadline):
		// The shard is restarting or moving: its state comes back from
		// the store nodes, so ask again shortly. Jitter spreads the
		// receivers that all lost the same shard.
		wait := p.backoff/2 + time.Duration(p.cfg.Rand.Int64N(int64(p.backoff/2)+1))
		p.backoff = min(2*p.backoff, maxBackoff)
		p.phase = phaseBackoff
		out.After(now.Add(wait), FetchTimer{Attempt: p.attempt, Kind: TimerRetry})
		return
	case errors.Is(err, messages.ErrTimeout):
		if !p.into {
			// A no-copy Locate is not withdrawn this way (see the shard's
			// CancelLocate); its own deadline, the same, ends it there.
			out.Send(directory.ShardOf(p.id), &messages.CancelLocate{ObjectId: p.id, Receiver: p.cfg.Self})
		}
		if p.deadline.After(p.locDeadline) {
			p.locate(out, now) // a later Get extended the deadline
			return
		}
		err = messages.Errorf(messages.ErrorCode_TIMEOUT, "object %q: no location before the deadline", p.id)
	}
	*out = p.abort(*out, err)
}

// superseded handles a failed rewind or append: a newer session owns the
// object (it stays for that session's Gets) or the object is gone.
func (p *FetchProtocol) superseded(out FetchOutput, err error) FetchOutput {
	if errors.Is(err, messages.ErrCanceled) {
		return p.finish(out, messages.ErrCanceled)
	}
	return p.abort(out, err)
}

// abort gives up: waiters see err and the directory forgets this copy.
func (p *FetchProtocol) abort(out FetchOutput, err error) FetchOutput {
	if p.into {
		return p.finish(out, err) // no copy, no claim: nothing to undo
	}
	if p.st.Done || p.st.Pinned {
		return p.finish(out, nil) // finished after all, or a Put on this node took over
	}
	out.Store = StoreOp{Kind: OpAbort, Err: err}
	out.Send(directory.ShardOf(p.id), &messages.FetchAborted{ObjectId: p.id, Receiver: p.cfg.Self})
	return p.finish(out, err)
}

func (p *FetchProtocol) finish(out FetchOutput, err error) FetchOutput {
	p.phase = phaseDone
	out.Done, out.Err = true, err
	return out
}

func (p *FetchProtocol) written() int64 {
	if p.into {
		return p.have
	}
	return p.st.Written
}

func (p *FetchProtocol) objectSize() int64 {
	if p.into {
		return p.size
	}
	return p.st.Size
}

// String describes the protocol's state for logs and failing tests.
func (p *FetchProtocol) String() string {
	return fmt.Sprintf("fetch %q: %s attempt %d stream %d sender %s", p.id, p.Waiting(), p.attempt, p.stream, p.sender.GetNodeId())
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
