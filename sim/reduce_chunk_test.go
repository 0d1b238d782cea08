package sim

import (
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// TestReduceMovesInTheTreesChunk: a Reduce's streams move in the chunk
// its coordinator chose for the tree's depth (plan.ReduceChunk), with a
// kill as without; a deep chain moves in less than the link's chunk and
// so keeps the chain (each host taking in S) where the link's chunk
// made the cost model leave it for a binary tree: at 256 hosts on the
// testbed's links the chain takes 1.18 S/B, the tree 2.2.
func TestReduceMovesInTheTreesChunk(t *testing.T) {
	const size = 32 << 20
	shrunk := 0
	for _, prof := range broadcastProfiles {
		for _, n := range []int{8, 64, 256} {
			for _, kill := range []int{0, 3} {
				c := cfg("reduce", n, size, 3)
				prof.set(&c.Params)
				c.Kill, c.KillAt = kill, 0.5
				o := run(t, c)
				B := c.Params.Bandwidth * c.Params.PayloadEfficiency / 8
				link := int64(plan.ChunkForObject(B, size))
				if o.Chunk > link || o.Chunk < plan.MinChunk {
					t.Errorf("%s N=%d kill=%d: streams moved chunks of up to %d bytes, want %d..%d", prof.name, n, kill, o.Chunk, plan.MinChunk, link)
				}
				if o.Chunk < link {
					shrunk++
				}
			}
		}
	}
	if shrunk == 0 {
		t.Error("no Reduce moved in a chunk smaller than its link's: the depth changed nothing")
	}
	c := cfg("reduce", 256, size, 3)
	o := run(t, c)
	if ideal := Ideal("reduce", 256, size, c.Params); o.Degree != 1 || o.Time > ideal*13/10 {
		t.Errorf("testbed N=256: degree %d in %v, want the chain within 1.3 S/B (%v)", o.Degree, o.Time, ideal*13/10)
	}
}
