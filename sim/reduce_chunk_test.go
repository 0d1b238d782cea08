package sim

import (
	"testing"
	"time"

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
				if o.Chunk > link || o.Chunk < plan.MinPipelineChunk {
					t.Errorf("%s N=%d kill=%d: streams moved chunks of up to %d bytes, want %d..%d", prof.name, n, kill, o.Chunk, plan.MinPipelineChunk, link)
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

// TestChunksUnderMinChunkPayTheirCPU: a stream's chunk under
// plan.MinChunk costs its receiver Params.ChunkCPU, scaled by how far
// under MinChunk it is (ByteCost was fitted on chunks of MinChunk and
// more and holds theirs), so a deep chain in small chunks takes longer
// than it would if they were free; from MinChunk up nothing changes.
func TestChunksUnderMinChunkPayTheirCPU(t *testing.T) {
	const size = 4 << 20
	timeOf := func(chunk int64, chunkCPU time.Duration) time.Duration {
		c := cfg("reduce", 16, size, 1)
		c.Params.Chunk, c.Params.ChunkCPU = chunk, chunkCPU
		return run(t, c).Time
	}
	if with, free := timeOf(16<<10, plan.ChunkCPU), timeOf(16<<10, 0); with <= free {
		t.Errorf("16 KiB chunks: %v with their CPU charged, %v free: want longer", with, free)
	}
	if with, free := timeOf(plan.MinChunk, plan.ChunkCPU), timeOf(plan.MinChunk, 0); with != free {
		t.Errorf("MinChunk chunks: %v with ChunkCPU, %v without: want the same", with, free)
	}
	p := DefaultParams(2)
	for _, tc := range []struct {
		n    int64
		want time.Duration
	}{
		{plan.MinChunk, 0}, {4 * plan.MinChunk, 0}, {plan.MinChunk / 2, plan.ChunkCPU / 2}, {plan.MinChunk / 4, plan.ChunkCPU * 3 / 4},
	} {
		if got := p.chunkCost(tc.n); got != tc.want {
			t.Errorf("chunkCost(%d) = %v, want %v", tc.n, got, tc.want)
		}
	}
	p.ChunkCPU = 0
	if got := p.chunkCost(1 << 10); got != 0 {
		t.Errorf("chunkCost with no ChunkCPU = %v, want 0", got)
	}
}

// TestGroupedUpdatesShortenAWideReduce: a coordinator whose Subscribes
// go grouped by shard hears its streamed sources' locations in one
// message a shard, not one a source, and a reduce of 256 on 10 Gbit/s
// links, bounded by the coordinator's messages, ends sooner than with
// single updates; both results are exact (no violation) and at 8 hosts
// nothing moves by more than a few microseconds.
func TestGroupedUpdatesShortenAWideReduce(t *testing.T) {
	timeOf := func(n int, single bool) time.Duration {
		c := cfg("reduce", n, 32<<20, 1)
		c.Params.Bandwidth, c.Params.Latency = 10e9, 20*time.Microsecond
		c.Params.ByteCost, c.Params.ReduceCost = UnshapedByteCost, UnshapedReduceCost
		c.Params.SingleUpdates = single
		return run(t, c).Time
	}
	if grouped, single := timeOf(256, false), timeOf(256, true); grouped >= single {
		t.Errorf("256 hosts: %v grouped, %v with single updates: want sooner", grouped, single)
	}
	if grouped, single := timeOf(8, false), timeOf(8, true); grouped > single+50*time.Microsecond {
		t.Errorf("8 hosts: %v grouped, %v with single updates", grouped, single)
	}
}
