package messages

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/membername"
)

// The requests of the application API are answered even when their
// store node cannot answer: its actor is not running (the dead letters of
// its process answer), or its process died with the request unanswered
// (the requester's own actor system answers, once the connection to it
// breaks or the cluster declares its member failed). The answer is the
// request's own reply type with an UNAVAILABLE error naming the actor
// that did not answer (Error.UndeliveredTo),
// so that an application actor that waits for a GetReply gets one,
// whoever sent the request and however. Registered at init: every
// program that can decode these messages has it.
func init() {
	actor.SetRequestReplies(&actor.RequestReplies{
		Undeliverable: undeliverableReply,
		TooLarge:      tooLargeReply,
		Busy:          busyReply,
		Request:       requestKey,
		Reply:         replyKey,
	})
}

// The kinds of ReplyKey, one per request type.
const (
	kindPut    = "Put"
	kindGet    = "Get"
	kindDelete = "Delete"
	kindQuery  = "QueryObject"
	kindReduce = "Reduce"
	// kindWait's replies name no id: a sender's open waits at one
	// address are answered in turn, matched by count.
	kindWait = "WaitObjects"
)

// UndeliveredError is the error of a request whose target could not
// answer it: UNAVAILABLE, with UndeliveredTo naming target. why says what
// happened to it.
func UndeliveredError(target *actor.PID, why string) *Error {
	return &Error{Code: ErrorCode_UNAVAILABLE, UndeliveredTo: target.GetId(), NeverReached: actor.NeverReached(why),
		Message: membername.Actor(target) + " " + why + ": the request was not answered"}
}

// NeverReachedBy reports whether err says the request never reached
// target (it was not running, or the request was never sent to it): sent
// again elsewhere, it cannot run twice.
func NeverReachedBy(err *Error, target *actor.PID) bool {
	return IsUndeliveredBy(err, target) && err.GetNeverReached()
}

// IsUndelivered reports whether err says an actor did not serve the
// request (it was not running, stopped with it waiting, or its process
// died).
func IsUndelivered(err *Error) bool { return err.GetUndeliveredTo() != "" }

// IsUndeliveredBy reports whether err says target itself did not serve
// the request: asking target again fails the same way. An error naming
// another actor (one that target handed the request to) is not target's.
func IsUndeliveredBy(err *Error, target *actor.PID) bool {
	return err.GetUndeliveredTo() != "" && err.GetUndeliveredTo() == target.GetId()
}

// UndeliveredReply is the reply to request when its target cannot
// answer it; ok is false for a message that is not an application API
// request.
func UndeliveredReply(request any, target *actor.PID, why string) (reply any, ok bool) {
	return undeliverableReply(request, target, why)
}

func undeliverableReply(request any, target *actor.PID, why string) (any, bool) {
	return withError(request, UndeliveredError(target, why))
}

// tooLargeReply answers a request that, encoded, is past what one
// Proto.Actor remote message carries: INVALID_ARGUMENT naming the limit
// (not sent, so its target never saw it).
func tooLargeReply(request any, target *actor.PID, size, limit int) (any, bool) {
	err := Errorf(ErrorCode_INVALID_ARGUMENT,
		"the request to %s is %d bytes encoded, past the %d bytes one Proto.Actor remote message carries: send it from an actor in the member's own actor system (Member.Spawn), or use a member's Client or a cluster.Dial client (in another process, one made from the actor's own actor system: cluster.WithActorSystem), whose bytes never ride in a remote message",
		membername.Actor(target), size, limit)
	return withError(request, err)
}

// busyReply answers a request that a full queue on its way had no room
// for (its target's mailbox, or the connection to its target's process):
// RESOURCE_EXHAUSTED naming the bound (not delivered, so the target never
// saw it; retry later).
func busyReply(request any, target *actor.PID, queued, limit int) (any, bool) {
	err := Errorf(ErrorCode_RESOURCE_EXHAUSTED,
		"the request to %s was not delivered: %d messages are queued on its way, the bound is %d; retry later",
		membername.Actor(target), queued, limit)
	return withError(request, err)
}

// withError is request's reply carrying err.
func withError(request any, err *Error) (any, bool) {
	switch m := request.(type) {
	case *Put:
		return &PutReply{ObjectId: m.GetObjectId(), Error: err}, true
	case *Get:
		return &GetReply{ObjectId: m.GetObjectId(), Error: err}, true
	case *Delete:
		return &DeleteReply{ObjectId: m.GetObjectId(), Error: err}, true
	case *QueryObject:
		return &ObjectInfo{ObjectId: m.GetObjectId(), Error: err}, true
	case *Reduce:
		return &ReduceReply{TargetId: m.GetTargetId(), Error: err}, true
	case *WaitObjects:
		return &WaitObjectsReply{NotReady: m.GetObjectIds(), Error: err}, true
	}
	return nil, false
}

func requestKey(request any) (actor.ReplyKey, time.Duration, bool) {
	var kind, id string
	var ms int64
	switch m := request.(type) {
	case *Put:
		kind, id, ms = kindPut, m.GetObjectId(), m.GetTimeoutMs()
	case *Get:
		kind, id, ms = kindGet, m.GetObjectId(), m.GetTimeoutMs()
	case *Delete:
		kind, id, ms = kindDelete, m.GetObjectId(), m.GetTimeoutMs()
	case *QueryObject:
		kind, id, ms = kindQuery, m.GetObjectId(), m.GetTimeoutMs()
	case *Reduce:
		kind, id, ms = kindReduce, m.GetTargetId(), m.GetTimeoutMs()
	case *WaitObjects:
		kind, ms = kindWait, m.GetTimeoutMs()
	default:
		return actor.ReplyKey{}, 0, false
	}
	return actor.ReplyKey{Kind: kind, ID: id}, time.Duration(max(ms, 0)) * time.Millisecond, true
}

func replyKey(reply any) (actor.ReplyKey, bool) {
	switch m := reply.(type) {
	case *PutReply:
		return actor.ReplyKey{Kind: kindPut, ID: m.GetObjectId()}, true
	case *GetReply:
		return actor.ReplyKey{Kind: kindGet, ID: m.GetObjectId()}, true
	case *DeleteReply:
		return actor.ReplyKey{Kind: kindDelete, ID: m.GetObjectId()}, true
	case *ObjectInfo:
		return actor.ReplyKey{Kind: kindQuery, ID: m.GetObjectId()}, true
	case *ReduceReply:
		return actor.ReplyKey{Kind: kindReduce, ID: m.GetTargetId()}, true
	case *WaitObjectsReply:
		return actor.ReplyKey{Kind: kindWait}, true
	}
	return actor.ReplyKey{}, false
}
