package member

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkChunkCPU fetches a 32 MiB object from one member to another
// over the TCP data plane (two members joined as `hoplite node` members
// are, in this process) in fixed chunks of several sizes, and reports the
// process's CPU per fetch, sender's and receiver's together. The
// difference between two chunk sizes over the difference in their chunk
// counts is what a chunk costs beside its bytes: the per-chunk CPU the
// simulator charges a stream (sim.Params.ChunkCPU) and the cost model a
// pipeline's fill (plan.ChunkCPU), which decide how small a deep chain's
// chunk may go.
//
//	go test -run '^$' -bench ChunkCPU -benchtime 20x -count 5 ./internal/member/
func BenchmarkChunkCPU(b *testing.B) {
	const size = 32 << 20
	data := randomBytes(7, size)
	for _, chunk := range []int{8 << 10, 16 << 10, 32 << 10, 64 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			src, dst := joinPair(b, quietLog(), func(c *MemberConfig) { c.ChunkSize = chunk })
			ctx := benchContext(b, benchTimeout)
			var cpu time.Duration
			b.SetBytes(size)
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				id := fmt.Sprintf("chunk-cpu-%d", i)
				if err := src.Client().Put(ctx, id, data); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				c0 := processCPU(b)
				got, err := dst.Client().GetReadOnly(ctx, id)
				cpu += processCPU(b) - c0
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if len(got) != size || got[size-1] != data[size-1] || got[size/2] != data[size/2] {
					b.Fatalf("fetched %d bytes, not the object's", len(got))
				}
				got = nil
				if err := dst.Client().Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/n/float64(size/chunk), "cpu-ns/chunk")
		})
	}
}
