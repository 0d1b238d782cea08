package member

import (
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// A cluster that only Puts and Reduces (no Get ever fetches) measures its
// bandwidth from the reduce trees' streams of whole sources, so the cost
// model and the adaptive chunk leave their defaults. The sources are Put
// before each Reduce, but a tree measures only if its coordinator knew
// every input complete when it planned, which a Put that just returned
// does not always show yet: most rounds measure, and three must.
func TestReduceOnlyClusterMeasuresBandwidth(t *testing.T) {
	const (
		nodes  = 4
		link   = 50e6 // 400 Mbit/s
		size   = 1 << 20
		rounds = 12
		want   = 3
	)
	l := start(t, Config{Nodes: nodes, LinkBandwidth: link})
	ctx := deadline(t, 60*time.Second)
	prev, measuring := 0, 0
	for round := 0; round < rounds && measuring < want; round++ {
		var sources []string
		for i := 0; i < nodes; i++ {
			id := fmt.Sprintf("est-%d-%d", round, i)
			rdPut(t, ctx, l, i, id, randomFloat32s(uint64(10*round+i), size))
			sources = append(sources, id)
		}
		target := fmt.Sprintf("est-sum-%d", round)
		if _, err := l.Client(0).Reduce(ctx, target, sources, nodes, messages.ReduceOp_SUM, messages.DType_FLOAT32); err != nil {
			t.Fatal(err)
		}
		// The sample is recorded where the stream ended, which may be
		// after the root answered the Reduce.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if _, _, _, n := l.estimator.Estimate(); n > prev {
				measuring++
				break
			}
		}
		_, _, _, prev = l.estimator.Estimate()
		for _, id := range append(sources, target) {
			if err := l.Client(0).Delete(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if measuring < want {
		t.Fatalf("%d of the Reduces of whole 1 MiB sources measured the link, want %d", measuring, want)
	}
	// The emulated link paces every chunk, so B cannot be far above it
	// however the machine is loaded. How far below it a loaded machine
	// puts it is timing, which a test does not judge (a CI run measured
	// 11.5 MB/s on the 50 MB/s link); the benchmarks do.
	_, B, _, n := l.estimator.Estimate()
	t.Logf("B = %.1f MB/s from %d samples on a %.0f MB/s link", B/1e6, n, link/1e6)
	if B <= 0 || B > link*4 {
		t.Fatalf("measured B = %.0f B/s on a %.0f B/s link", B, link)
	}
	if c := plan.ChunkFor(B); c > 512<<10 {
		t.Fatalf("the adaptive chunk is %d for B = %.0f B/s: it did not follow the measurement", c, B)
	}
}
