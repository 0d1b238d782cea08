package directory

import (
	"hash/fnv"
	"strings"

	"github.com/hoplite-go/hoplite/messages"
)

// ShardIndex maps an object id to one of n shards (FNV-1a), the same way
// on every node.
func ShardIndex(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// InternalPrefix starts the ids of Reduce intermediates: they live only in
// stores, and applications may not use it.
const InternalPrefix = "\x00"

// ValidateObjectID reports whether id is acceptable as an object id
// anywhere in the system (the directory is also asked about internal ids).
func ValidateObjectID(id string, maxLen int) *messages.Error {
	if id == "" {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "empty object id")
	}
	if len(id) > maxLen {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object id of %d bytes exceeds the limit of %d", len(id), maxLen)
	}
	return nil
}

// ValidateApplicationID is ValidateObjectID for an id an application
// names (Put, Get, Delete, Reduce targets and sources): the internal
// prefix is reserved.
func ValidateApplicationID(id string, maxLen int) *messages.Error {
	if err := ValidateObjectID(id, maxLen); err != nil {
		return err
	}
	if strings.HasPrefix(id, InternalPrefix) {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "object id %q starts with NUL, which is reserved for internal objects", id)
	}
	return nil
}

// ShardOf names, as the receiver of a pure core's send (outbox.Send.To),
// the directory shard that owns an object id. Cores do not know where
// shards live (they move as members come and go); the shell resolves it
// when it sends.
type ShardOf string
