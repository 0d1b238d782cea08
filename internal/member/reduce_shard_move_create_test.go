package member

import (
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction"
)

// A Reduce's coordinator reserves its target in the target's shard, of
// which it is a child; the tree's root creates the target at the shard
// its own member's table names. If the shard moves in between (back to a
// restarted member), the root's CreateObject reaches a shard that holds
// no reservation for the Reduce, while the coordinator, with its shard
// on the old home, still runs: that is a shard move, and the caller's
// node starts the Reduce again at the shard's new home. Chaos seed 78
// under load: node-4 (the target's shard's home) was killed and
// restarted, the shard moved to node-0 and back, and the Reduce failed
// INVALID_ARGUMENT "object ... is not reserved for reduce ...".
//
// The first attempt's root holds its target's creation until node-4 has
// restarted and the shard runs there again; the old home's shard is
// held in its stop until the Reduce answers, so its coordinator is the
// one that hears the root's refusal (createAtNewHome, which the inline
// and sliced shapes share).
func TestReduceWhoseRootCreatesAtTheShardsNewHomeStartsAgain(t *testing.T) {
	createAtNewHome(t, false, reduction.ShapeDAry)
}
