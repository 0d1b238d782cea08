package storeactor

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// A zero ChunkSize follows the measured bandwidth and the object's size;
// a given one is kept.
func TestStreamChunkAdaptsOnlyWhenNotFixed(t *testing.T) {
	est := estimator.New(time.Millisecond, 1e9)
	auto := (&Config{Estimator: est}).withDefaults()
	if got := auto.streamChunk(32 << 20); got != plan.UnmeasuredChunk {
		t.Fatalf("before any measurement: %d, want plan.UnmeasuredChunk", got)
	}
	// Unmeasured, a small object still moves in 16 chunks: the reader
	// picks a stream's chunk, and one whole-object reader in a chain
	// makes every hop above it wait for the whole object.
	if got := auto.streamChunk(1 << 20); got != 64<<10 {
		t.Fatalf("1 MiB before any measurement: %d, want 64 KiB", got)
	}
	est.ObserveTransfer(50e6, time.Second) // 400 Mbit/s
	if got := auto.streamChunk(32 << 20); got != 256<<10 {
		t.Fatalf("at 400 Mbit/s: %d, want 256 KiB", got)
	}
	// A 1 MiB object moves in 16 chunks, so that a chain pipelines it.
	if got := auto.streamChunk(1 << 20); got != 64<<10 {
		t.Fatalf("1 MiB at 400 Mbit/s: %d, want 64 KiB", got)
	}
	fixed := (&Config{Estimator: est, ChunkSize: 32 << 10}).withDefaults()
	if got := fixed.streamChunk(1 << 20); got != 32<<10 {
		t.Fatalf("fixed 32 KiB: %d", got)
	}
	if got := (&Config{}).withDefaults().streamChunk(1 << 20); got != 1<<20 {
		t.Fatalf("no estimator: %d, want 1 MiB", got)
	}
}
