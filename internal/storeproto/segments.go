package storeproto

import (
	"fmt"
	"slices"

	"github.com/hoplite-go/hoplite/messages"
)

// A Put of unknown length through a data path (a pipe) is sent in
// segments (messages.PutFrom with size -1): the member fetches them in
// order and commits the object when a short one ends it, so the Client
// holds two segments of it at most, never the whole.
const (
	// StreamSegment is the segment size a Client sends: a few ms of a
	// link, so that one round trip per segment is small beside its bytes.
	StreamSegment = 8 << 20
	// MinSegment and MaxSegment bound the segment size a store node
	// accepts: more round trips than bytes below, a sender's buffers
	// outgrowing what a stream is for above.
	MinSegment = 64 << 10
	MaxSegment = 64 << 20
)

// SegmentName is the name under which the sender of a PutFrom of unknown
// length serves segment k of object id (its bytes from k times the
// segment size on).
func SegmentName(id string, k int64) string { return fmt.Sprintf("%s#segment-%d", id, k) }

// MaxWaitObjects bounds the ids of one Wait (messages.WaitObjects).
const MaxWaitObjects = 1024

// CheckWait checks a Wait's arguments, as a store node checks a
// WaitObjects (their ids' form aside).
func CheckWait(ids []string, k int) *messages.Error {
	if len(ids) > MaxWaitObjects {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "wait: %d ids; at most %d per call", len(ids), MaxWaitObjects)
	}
	if k < 1 || k > len(ids) {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "wait: k %d outside 1..%d (the ids given)", k, len(ids))
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for i := 1; i < len(sorted); i++ {
		if sorted[i] == sorted[i-1] {
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "wait: id %q given twice", sorted[i])
		}
	}
	return nil
}
