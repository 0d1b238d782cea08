package actor

import (
	"sync/atomic"
	"time"
)

// Hoplite patch (this whole file): a request whose target cannot answer
// is answered with the reply its requester expects. Upstream answered a
// dead-lettered request with a *DeadLetterResponse, which an actor that
// sent a Get and waits for a GetReply does not expect, and nothing at
// all for a request delivered to a process that then died: the requester
// waited for good unless it watched the target itself.

// ReplyKey pairs a request with its reply: Kind names the request type
// (a constant, so that building a key allocates nothing) and ID the
// field both carry (an object id).
type ReplyKey struct {
	Kind string
	ID   string
}

// RequestReplies maps the request types a program knows to their replies.
// Only those requests get an undeliverable reply, and only they are
// tracked by the remote layer until answered.
type RequestReplies struct {
	// Undeliverable returns the reply that answers request when it cannot
	// reach a running target (target, why says what happened); ok is false
	// for a message that is not a known request.
	Undeliverable func(request interface{}, target *PID, why string) (reply interface{}, ok bool)
	// Request returns the key of request's reply and how long the request
	// may wait for it (0: its target's default); ok is false for a message
	// that is not a known request.
	Request func(request interface{}) (key ReplyKey, wait time.Duration, ok bool)
	// TooLarge, if set, returns the reply that answers request when the
	// remote layer cannot send it: encoded, it is size bytes, past the
	// limit a remote message may carry. ok is false for a message that
	// is not a known request.
	TooLarge func(request interface{}, target *PID, size, limit int) (reply interface{}, ok bool)
	// Busy, if set, returns the reply that answers request when its
	// target's mailbox holds queued messages, past limit: the remote
	// layer did not deliver it. ok is false for a message that is not a
	// known request.
	Busy func(request interface{}, target *PID, queued, limit int) (reply interface{}, ok bool)
	// Reply returns the key of the request that reply answers; ok is false
	// for a message that is not a known reply. It must know the replies
	// Undeliverable returns too: a target's dead letters answer with them.
	Reply func(reply interface{}) (key ReplyKey, ok bool)
}

// The reasons UndeliverableReply is given: the request never reached its
// target (WhyNotRunning, WhyUnreachable), or it may have (WhyFailedBefore).
const (
	WhyNotRunning   = "is not running"            // dead-lettered in the target's process
	WhyUnreachable  = "could not be reached"      // never sent: the connection did not come up
	WhyFailedBefore = "failed before it answered" // sent; the target's process ended with it open
)

// NeverReached reports whether why says the request never reached its
// target.
func NeverReached(why string) bool { return why == WhyNotRunning || why == WhyUnreachable }

var requestReplies atomic.Pointer[RequestReplies]

// SetRequestReplies registers r for every actor system in the process
// (nil: none). A program registers its request types once, at init.
func SetRequestReplies(r *RequestReplies) { requestReplies.Store(r) }

// GetRequestReplies returns what SetRequestReplies registered, or nil.
func GetRequestReplies() *RequestReplies { return requestReplies.Load() }

// UndeliverableReply is the registered reply to request when its target
// cannot answer; ok is false if none is registered for its type.
func UndeliverableReply(request interface{}, target *PID, why string) (reply interface{}, ok bool) {
	r := requestReplies.Load()
	if r == nil || r.Undeliverable == nil {
		return nil, false
	}
	return r.Undeliverable(request, target, why)
}

// TooLargeReply is the registered reply to request when it is too large
// for a remote message; ok is false if none is registered for its type.
func TooLargeReply(request interface{}, target *PID, size, limit int) (reply interface{}, ok bool) {
	r := requestReplies.Load()
	if r == nil || r.TooLarge == nil {
		return nil, false
	}
	return r.TooLarge(request, target, size, limit)
}

// BusyReply is the registered reply to request when its target's mailbox
// is full; ok is false if none is registered for its type.
func BusyReply(request interface{}, target *PID, queued, limit int) (reply interface{}, ok bool) {
	r := requestReplies.Load()
	if r == nil || r.Busy == nil {
		return nil, false
	}
	return r.Busy(request, target, queued, limit)
}
