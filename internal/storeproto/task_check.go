package storeproto

import (
	"math"

	"github.com/hoplite-go/hoplite/messages"
)

// CheckTask says why a store node cannot run a reduce task, or nil. It
// checks what a worker needs before it starts: a task without a reduce
// id, output, generation or with a negative position or size, an input
// without a node, or a position without a source (a gather has none)
// names nothing a worker could run or report about coherently. Such a
// task is a coordinator's bug or a corrupt message; the node answers it
// as the position's start error (INVALID_ARGUMENT), which fails the
// Reduce, instead of spawning a worker that fails later or never.
func CheckTask(t *messages.ReduceTask) *messages.Error {
	bad := func(format string, args ...any) *messages.Error {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce task: "+format, args...)
	}
	switch {
	case t == nil:
		return bad("no task")
	case t.GetReduceId() == "":
		return bad("position %d: no reduce id", t.GetPosition())
	case t.GetPosition() < 0:
		return bad("position %d is negative", t.GetPosition())
	case t.GetGeneration() < 1:
		return bad("position %d: generation %d", t.GetPosition(), t.GetGeneration())
	case t.GetSize() < 0:
		return bad("position %d: size %d", t.GetPosition(), t.GetSize())
	case t.GetSourceOffset() < 0 || t.GetSourceOffset() > math.MaxInt64-t.GetSize():
		// A slice's end past what an int64 holds wraps around, and passed
		// for one inside the source.
		return bad("position %d: a slice of %d bytes at %d", t.GetPosition(), t.GetSize(), t.GetSourceOffset())
	case t.GetOutputId() == "":
		return bad("position %d: no output id", t.GetPosition())
	case t.GetSourceId() == "" && !t.GetGather() && !t.GetRelay():
		return bad("position %d: no source", t.GetPosition())
	case t.GetRelay() && (len(t.GetChildren()) != 1 || t.GetGather() || t.GetSourceId() != ""):
		return bad("position %d: a relay copies exactly one input and has no source", t.GetPosition())
	}
	for i, c := range t.GetChildren() {
		if c.GetNode().GetNodeId() == "" || c.GetObjectId() == "" {
			return bad("position %d: input %d names no node or object", t.GetPosition(), i)
		}
		if c.GetOffset() < 0 || c.GetOffset() > t.GetSize() {
			return bad("position %d: input %d at offset %d of %d bytes", t.GetPosition(), i, c.GetOffset(), t.GetSize())
		}
	}
	return nil
}
