package storeactor

import (
	"testing"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// An adapting node reads a stream in the shard's chunk where it is
// smaller than its own (a deep broadcast tree), never below
// plan.MinPipelineChunk; a node with a fixed ChunkSize keeps it.
func TestTreeChunk(t *testing.T) {
	adapting := &Config{adaptChunk: true}
	fixed := &Config{ChunkSize: 1 << 20}
	for _, c := range []struct {
		cfg         *Config
		own         int
		shard, want int64
	}{
		{adapting, 256 << 10, 0, 256 << 10},
		{adapting, 256 << 10, 64 << 10, 64 << 10},
		{adapting, 256 << 10, 1 << 20, 256 << 10},
		{adapting, 256 << 10, 1 << 10, plan.MinPipelineChunk},
		{fixed, 1 << 20, 64 << 10, 1 << 20},
	} {
		if got := c.cfg.treeChunk(c.own, c.shard); int64(got) != c.want {
			t.Errorf("adapting %v, own %d, shard %d: chunk %d, want %d", c.cfg.adaptChunk, c.own, c.shard, got, c.want)
		}
	}
}
