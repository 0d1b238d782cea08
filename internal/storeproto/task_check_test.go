package storeproto

import (
	"errors"
	"math"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// A task's slice and its inputs' offsets come from another process:
// CheckTask refuses one that starts before the object, or whose end is
// past what an int64 holds (it wrapped around and passed for a slice
// inside the source), and an input placed outside the output.
func TestCheckTaskRefusesOffsetsOutsideTheObject(t *testing.T) {
	task := func() *messages.ReduceTask {
		return &messages.ReduceTask{ReduceId: "r#1", Size: 8, Generation: 1, OutputId: "\x00o", SourceId: "s", Sliced: true, SourceOffset: 16,
			Children: []*messages.ReduceInput{{Node: &messages.NodeRef{NodeId: "m"}, ObjectId: "x", Offset: 8}}}
	}
	if err := CheckTask(task()); err != nil {
		t.Fatalf("a good slice: %v", err)
	}
	for name, mut := range map[string]func(*messages.ReduceTask){
		"negative slice offset":   func(t *messages.ReduceTask) { t.SourceOffset = -1 },
		"slice end past an int64": func(t *messages.ReduceTask) { t.SourceOffset = math.MaxInt64 - 4 },
		"negative input offset":   func(t *messages.ReduceTask) { t.Children[0].Offset = -1 },
		"input past the output":   func(t *messages.ReduceTask) { t.Children[0].Offset = 9 },
	} {
		bad := task()
		mut(bad)
		if err := CheckTask(bad); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
}
