package member

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// With the default (adaptive) chunk, a cluster whose objects are only
// 1 MiB — one chunk before anything is measured — still measures its
// bandwidth, and the chunk then follows it (256 KiB at 400 Mbit/s).
func TestAdaptiveChunkLearnsFromOneChunkObjects(t *testing.T) {
	l := start(t, Config{Nodes: 2, LinkBandwidth: 50e6})
	ctx := deadline(t, 20*time.Second)
	if err := l.Client(0).Put(ctx, "one-mib", randomBytes(3, 1<<20)); err != nil {
		t.Fatal(err)
	}
	// Only a transfer from a copy the directory knows complete measures
	// the link (a partial one may be limited by its producer): the Put's
	// completion reaches the shard on its own path, after the Put's reply.
	eventually(t, 10*time.Second, "the directory to record the creator's copy complete", func() bool {
		info, err := l.Client(1).Info(ctx, "one-mib", false)
		for _, loc := range info.GetLocations() {
			if err == nil && loc.GetState() == messages.LocationState_COMPLETE {
				return true
			}
		}
		return false
	})
	if _, err := l.Client(1).Get(ctx, "one-mib"); err != nil {
		t.Fatal(err)
	}
	_, B, _, n := l.estimator.Estimate()
	if n == 0 {
		t.Fatal("a 1 MiB fetch was not measured: the chunk stays at 1 MiB")
	}
	if c := plan.ChunkFor(B); c > 512<<10 {
		t.Fatalf("measured %.0f B/s on a 50 MB/s link; chunk %d", B, c)
	}
}
