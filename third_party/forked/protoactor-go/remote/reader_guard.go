package remote

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/peer"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Hoplite patch (this whole file): every byte a peer sends is hostile.
// Upstream's endpoint reader indexed the batch's sender, target and type
// name tables with the envelope's indices unchecked, looked up unknown
// type names as nil, and had no recover on the path: one malformed
// MessageBatch from anyone who reached the port ended the process and
// lost every object it held. Here a batch that does not decode, or whose
// handling panics, ends that peer's stream only; the reader logs it
// (rate-limited) and counts it (Remote.RejectedBatches).

// MalformedError is why a peer's message batch was refused. The stream
// that carried it is closed; the peer's endpoint reconnects if it is a
// member.
type MalformedError struct {
	Reason string
	Err    error // the decoder's error, if any
}

func (e *MalformedError) Error() string {
	if e.Err != nil {
		return "malformed remote message: " + e.Reason + ": " + e.Err.Error()
	}
	return "malformed remote message: " + e.Reason
}

func (e *MalformedError) Unwrap() error { return e.Err }

// checkEnvelope checks the indices an envelope names against its batch's
// tables.
func checkEnvelope(e *MessageEnvelope, m *MessageBatch) error {
	if e == nil {
		return &MalformedError{Reason: "a nil envelope"}
	}
	if e.Target < 0 || int(e.Target) >= len(m.Targets) {
		return &MalformedError{Reason: fmt.Sprintf("target index %d of %d targets", e.Target, len(m.Targets))}
	}
	if m.Targets[e.Target] == nil {
		return &MalformedError{Reason: fmt.Sprintf("target %d is nil", e.Target)}
	}
	// Sender 0 means none; i names Senders[i-1].
	if e.Sender < 0 || int(e.Sender) > len(m.Senders) {
		return &MalformedError{Reason: fmt.Sprintf("sender index %d of %d senders", e.Sender, len(m.Senders))}
	}
	if e.Sender > 0 && m.Senders[e.Sender-1] == nil {
		return &MalformedError{Reason: fmt.Sprintf("sender %d is nil", e.Sender)}
	}
	if e.TypeId < 0 || int(e.TypeId) >= len(m.TypeNames) {
		return &MalformedError{Reason: fmt.Sprintf("type index %d of %d type names", e.TypeId, len(m.TypeNames))}
	}
	return nil
}

// checkDelivery refuses the decoded messages that would make this system
// act on a PID the peer left out, and, where the config refuses them,
// the messages that stop an actor.
func (r *Remote) checkDelivery(message interface{}) error {
	switch m := message.(type) {
	case *actor.Terminated:
		if m.Who == nil {
			return &MalformedError{Reason: "a Terminated names no actor"}
		}
	case *actor.Watch:
		if m.Watcher == nil {
			return &MalformedError{Reason: "a Watch names no watcher"}
		}
	case *actor.Unwatch:
		if m.Watcher == nil {
			return &MalformedError{Reason: "an Unwatch names no watcher"}
		}
	case *actor.Stop, *actor.PoisonPill:
		if r.config.RefuseRemoteStop {
			return &MalformedError{Reason: fmt.Sprintf("%T from another process (this system stops its actors itself)", m)}
		}
	}
	return nil
}

// safeMessageBatch handles a batch, turning a panic in its handling into
// an error for this stream alone.
func (s *endpointReader) safeMessageBatch(m *MessageBatch, from string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &MalformedError{Reason: fmt.Sprintf("handling it panicked: %v", p)}
		}
	}()
	return s.onMessageBatch(m, from)
}

// rejectLogEvery bounds the reader's log of refused batches: a peer that
// sends nothing but malformed batches cannot flood the log.
const rejectLogEvery = time.Second

// rejectLog is the rate-limited log of refused batches.
type rejectLog struct {
	count      atomic.Int64
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// RejectedBatches is how many message batches this system refused since
// it started: malformed ones, ones whose handling panicked, and stops
// from another process where they are refused. Each closed the stream
// that carried it.
func (r *Remote) RejectedBatches() int64 { return r.rejects.count.Load() }

// rejected counts and logs a batch refused from stream's peer.
func (r *Remote) rejected(stream Remoting_ReceiveServer, err error) {
	r.rejects.count.Add(1)
	from := "unknown"
	if p, ok := peer.FromContext(stream.Context()); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	l := &r.rejects
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < rejectLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	r.Logger().Warn("EndpointReader refused a message batch and closed the peer's stream",
		slog.String("peer", from), slog.Any("error", err), slog.Int("suppressed", suppressed))
}

// busy refuses a peer's message to a local actor whose mailbox holds
// Config.MaxQueuedFromRemote messages already: a registered request is
// answered with its Busy reply (RESOURCE_EXHAUSTED for Hoplite's), and
// the refusal is counted and logged (rate-limited).
func (r *Remote) busy(target, sender *actor.PID, message interface{}) bool {
	limit := r.config.MaxQueuedFromRemote
	if limit <= 0 {
		return false
	}
	ref, ok := r.actorSystem.ProcessRegistry.GetLocal(target.Id)
	if !ok {
		return false
	}
	ap, ok := ref.(*actor.ActorProcess)
	if !ok {
		return false
	}
	queued := ap.QueuedUserMessages()
	if queued < limit {
		return false
	}
	r.refuseQueued(target, sender, message, queued, limit, "its target's mailbox is full")
	return true
}

// queueFull refuses a delivery to address whose endpoint writer holds
// Config.MaxQueuedToRemote messages already.
func (r *Remote) queueFull(address string, rd *remoteDeliver, queued int64) {
	r.refuseQueued(rd.target, rd.sender, rd.message, int(queued), r.config.MaxQueuedToRemote,
		"the queue to "+address+" is full (its peer does not read)")
	if rd.sender == nil {
		r.actorSystem.EventStream.Publish(&actor.DeadLetterEvent{Message: rd.message, Sender: rd.sender, PID: rd.target})
	}
}

// refuseQueued answers a registered request with its Busy reply, and
// counts and logs (rate-limited) the refusal.
func (r *Remote) refuseQueued(target, sender *actor.PID, message interface{}, queued, limit int, why string) {
	r.refusedBusy.Add(1)
	if sender != nil {
		if reply, ok := actor.BusyReply(message, target, queued, limit); ok {
			r.actorSystem.Root.Send(sender, reply)
		}
	}
	l := &r.busyLog
	l.mu.Lock()
	now := time.Now()
	if now.Sub(l.last) < rejectLogEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := l.suppressed
	l.last, l.suppressed = now, 0
	l.mu.Unlock()
	r.Logger().Warn("remote refused a message: "+why,
		slog.String("target", target.GetAddress()+"/"+target.GetId()), slog.Int("queued", queued), slog.Int("limit", limit),
		slog.String("type", fmt.Sprintf("%T", message)), slog.Int("suppressed", suppressed))
}

// RefusedBusy is how many messages this system refused at a full queue:
// peers' messages to an actor with Config.MaxQueuedFromRemote queued, and
// its own to a peer whose writer held Config.MaxQueuedToRemote.
func (r *Remote) RefusedBusy() int64 { return r.refusedBusy.Load() }
