package member

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkStoreNodeDuringLargePuts is how long a store node keeps a
// small request waiting while its member Puts 32 MiB objects: a Get of a
// 1 KiB object it holds, timed on a second goroutine during the Puts.
// "bare" sends each Put as the bare message, whose fingerprint the node
// computes in its Receive (as a remote client's Put is); "client" is the
// member's own Client, which computes it before sending (localput).
// Reported: the Gets' median, p99 and longest wait, the two side by side.
func BenchmarkStoreNodeDuringLargePuts(b *testing.B) {
	l, err := StartLocal(Config{Nodes: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := l.Client(0)
	if err := c.Put(ctx, "probe", testutil.Pattern(1, 1024)); err != nil {
		b.Fatal(err)
	}
	data := testutil.Pattern(2, 32<<20)
	m := l.Member(0)
	n := 0 // ids are never reused: a deleted id's Put is refused (DELETED)
	for _, mode := range []string{"bare", "client"} {
		b.Run(mode, func(b *testing.B) {
			var waits []time.Duration
			for b.Loop() {
				id := fmt.Sprintf("big-%s-%d", mode, n)
				n++
				done := make(chan error, 1)
				go func() {
					if mode == "client" {
						done <- c.Put(ctx, id, data)
						return
					}
					res, err := actorutil.Request(ctx, m.System().Root, m.StoreNode(), &messages.Put{ObjectId: id, Data: data})
					if err == nil {
						err = messages.ErrOrNil(res.(*messages.PutReply).GetError())
					}
					done <- err
				}()
				for waiting := true; waiting; {
					start := time.Now()
					if _, err := c.GetReadOnly(ctx, "probe"); err != nil {
						b.Fatal(err)
					}
					waits = append(waits, time.Since(start))
					select {
					case err := <-done:
						if err != nil {
							b.Fatal(err)
						}
						waiting = false
					default:
					}
				}
				if err := c.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			slices.Sort(waits)
			q := func(f float64) float64 { return float64(waits[int(f*float64(len(waits)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "get-p50-µs")
			b.ReportMetric(q(0.99), "get-p99-µs")
			b.ReportMetric(float64(waits[len(waits)-1].Microseconds()), "get-max-µs")
		})
	}
}
