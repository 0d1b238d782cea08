package storeproto

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// PutRequest is what a PutRegistration needs to know about one Put (or
// StoreReduced) whose creator copy the shell has already made in the
// local store.
type PutRequest struct {
	// RequestID names this registration in the CreateObject and its reply.
	RequestID   uint64
	ObjectID    string
	Size        int64
	Fingerprint uint64
	Creator     *messages.NodeRef
	// ReduceID is set for a StoreReduced: the coordinator's Reduce stores
	// its reserved target, answered with a StoreReducedReply.
	ReduceID string
	Reduced  bool
	// ReducedIDs are the sources a StoreReduced's result reduces, kept
	// with the copy (see objstore.Object.SetReduced).
	ReducedIDs []string
	// Inline carries the bytes to the directory: the object is under the
	// inline limit, and the directory serves Gets from its registration on.
	Inline     bool
	InlineData []byte
	// Complete asks the directory to record an inline copy COMPLETE at
	// its registration (CreateObject.complete): the shell copies the
	// bytes in as soon as the answer comes (a fast Put on its caller's
	// goroutine, the node on one of its own), and nothing publishes the
	// copy after it if the directory did (PutStep.Recorded).
	Complete bool
	// Promoted says the copy fills a placeholder a Get on this node left:
	// its waiters need these bytes even if the object existed elsewhere.
	Promoted bool
	// Requester is who hears the answer (nil for a tell).
	Requester any
	// Deadline bounds the wait for the directory's reply.
	Deadline time.Time
}

// putPhase is where a registration is.
type putPhase int

const (
	putIdle putPhase = iota
	putRegistering
	putCopying
	putDone
)

// PutRegistration is the protocol of one Put as a pure step machine:
// register the creator copy with the directory (CreateObject; the
// creator is a partial location from then on, so receivers may start
// pipelining), copy the bytes in, then publish the copy COMPLETE and
// answer. It reads no clock and does no I/O: the shell passes now in,
// carries out the store effects and sends of each PutStep, copies the
// bytes when told and reports back.
type PutRegistration struct {
	req      PutRequest
	phase    putPhase
	sent     time.Time
	existed  bool
	recorded bool // the directory recorded the copy COMPLETE at its registration
}

// PutStep is what the shell does after a step, in this order: observe
// the latency, apply the store effects (Abort, ForgetDeleted, Unpin),
// deliver the sends, arm the timers, start the copy-in, and forget the
// Put when Done.
type PutStep struct {
	outbox.Box
	// Latency is half the CreateObject's round trip, one control
	// message's latency for the estimator (0: nothing measured).
	Latency time.Duration
	// Abort drops the creator copy with this error (nil: keep it).
	Abort *messages.Error
	// ForgetDeleted: the directory took the id as a live object, so a
	// deletion this node remembers is older than its shard's memory and
	// must not come back to delete it when the shard is rebuilt.
	ForgetDeleted bool
	// Unpin keeps a promoted placeholder as an ordinary copy: the
	// object's creator copy lives elsewhere.
	Unpin bool
	// CopyIn starts copying the bytes; the shell reports CopiedIn.
	// Readable says Gets can already return the bytes without this copy
	// (see putEnded).
	CopyIn   bool
	Readable bool
	// Recorded: the directory recorded the copy COMPLETE at its
	// registration, so the copy-in's end publishes nothing. A shard that
	// moved or was rebuilt since may have heard of the copy PARTIAL, in
	// a republication: the shell publishes it COMPLETE there itself.
	Recorded bool
	// Done: the requester has its answer; Err is it (for logs).
	Done bool
	Err  *messages.Error
}

// PutDeadline is the timer message of a registration's deadline.
type PutDeadline struct{ ID uint64 }

// IgnoreDeadLetterLogging: a Put's deadline may fire after its node
// stopped, which is expected (Proto.Actor does not log such dead letters).
func (PutDeadline) IgnoreDeadLetterLogging() {}

// NewPutRegistration returns the registration of req, not started.
func NewPutRegistration(req PutRequest) *PutRegistration {
	return &PutRegistration{req: req}
}

// Request is what the registration was made with.
func (p *PutRegistration) Request() PutRequest { return p.req }

// onStart sends the CreateObject and arms the deadline.
func (p *PutRegistration) onStart(now time.Time) PutStep {
	var s PutStep
	if p.phase != putIdle {
		return s
	}
	p.phase, p.sent = putRegistering, now
	r := p.req
	create := &messages.CreateObject{ObjectId: r.ObjectID, Size: r.Size, Fingerprint: r.Fingerprint, Creator: r.Creator,
		ReduceId: r.ReduceID, RequestId: r.RequestID}
	if r.Inline {
		create.HasInline, create.InlineData, create.Complete = true, r.InlineData, r.Complete
	}
	s.Send(directory.ShardOf(r.ObjectID), create)
	s.After(r.Deadline, PutDeadline{ID: r.RequestID})
	return s
}

// onReply takes the directory's answer to the CreateObject.
func (p *PutRegistration) onReply(now time.Time, r *messages.CreateObjectReply) PutStep {
	var s PutStep
	if p.phase != putRegistering || r.GetRequestId() != p.req.RequestID {
		return s
	}
	// A CreateObject is answered at once: half its round trip is one
	// control message's latency.
	s.Latency = now.Sub(p.sent) / 2
	if e := r.GetError(); e != nil {
		s.Abort = e
		p.finish(&s, e)
		return s
	}
	s.ForgetDeleted = true
	p.existed = r.GetExisted()
	if p.existed {
		// The same bytes already live elsewhere: idempotent. A promoted
		// placeholder keeps them as an ordinary copy for its waiters.
		if !p.req.Promoted {
			s.Abort = messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q not stored here", p.req.ObjectID)
			p.finish(&s, nil)
			return s
		}
		s.Unpin = true
	}
	// The copy-in is bounded memory work and is not cut short by the
	// deadline: the directory already announced this copy.
	p.phase = putCopying
	s.CopyIn, s.Readable = true, p.req.Inline || p.existed
	p.recorded = p.req.Complete && r.GetRecordedComplete()
	s.Recorded = p.recorded
	return s
}

// onFailed ends a registration whose CreateObject will not be answered:
// the shard stopped (UNAVAILABLE) or the deadline passed (TIMEOUT). The
// shard may have registered the copy before it was lost to us, so the
// location is withdrawn.
func (p *PutRegistration) onFailed(err *messages.Error) PutStep {
	var s PutStep
	if p.phase != putRegistering {
		return s
	}
	s.Abort = err
	// It names this registration: a later one of the same copy (the Put
	// tried again) may reach the shard first, and stays.
	s.Send(directory.ShardOf(p.req.ObjectID), &messages.UnpublishLocation{ObjectId: p.req.ObjectID, Node: p.req.Creator,
		RequestId: p.req.RequestID})
	p.finish(&s, err)
	return s
}

// onDeadline is the registration's timer: without a reply by now, the Put
// fails with TIMEOUT. A copy-in under way is not cut short.
func (p *PutRegistration) onDeadline() PutStep {
	return p.onFailed(messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from the directory shard of %q before the deadline", p.req.ObjectID))
}

// onCopiedIn is the copy-in's report. complete says the copy is whole and
// complete in the store: it is published COMPLETE, unless the directory
// recorded it so at its registration (Recorded). Otherwise err is the
// Put's answer as putEnded decided it (nil when a Delete after the bytes
// were readable dropped the copy: it is not published, the directory has
// forgotten the object); a recorded copy that failed is withdrawn.
func (p *PutRegistration) onCopiedIn(complete bool, err *messages.Error) PutStep {
	var s PutStep
	if p.phase != putCopying {
		return s
	}
	switch {
	case complete && p.recorded:
		err = nil // the directory recorded it so at the registration
	case complete:
		s.Send(directory.ShardOf(p.req.ObjectID), &messages.PublishLocation{ObjectId: p.req.ObjectID, Node: p.req.Creator,
			State: messages.LocationState_COMPLETE, Size: p.req.Size, Fingerprint: p.req.Fingerprint, Creator: !p.existed})
		err = nil
	case p.recorded && err != nil:
		// A copy the directory holds whole failed to fill for a reason
		// no drop of its own explains: withdrawn, naming this
		// registration, so that no receiver is sent to it.
		s.Send(directory.ShardOf(p.req.ObjectID), &messages.UnpublishLocation{ObjectId: p.req.ObjectID, Node: p.req.Creator,
			RequestId: p.req.RequestID})
	}
	p.finish(&s, err)
	return s
}

func (p *PutRegistration) finish(s *PutStep, err *messages.Error) {
	p.phase = putDone
	s.Done, s.Err = true, err
	s.Send(p.req.Requester, PutAnswer(p.req, err))
}

// PutAnswer is the reply to the request a registration serves.
func PutAnswer(r PutRequest, err *messages.Error) proto.Message {
	if r.Reduced {
		return &messages.StoreReducedReply{ReduceId: r.ReduceID, Error: err}
	}
	return &messages.PutReply{ObjectId: r.ObjectID, Error: err}
}
