package member

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkSmallAllReduceTCP is BenchmarkSmallAllReduce between eight
// members joined as `hoplite node` members are (Join: Proto.Actor remote
// and the TCP data plane over loopback, all in this process), where a
// control message between members costs what it costs between hosts but
// the wire: its encoding, a write and a read, a wake-up. The targets'
// shards are on any member (the ids are the same in every run, their
// placement follows the members' incarnations). It reports the process's
// CPU time per AllReduce (all eight members') and the p50 and p99
// latency.
//
//	go test -run '^$' -bench SmallAllReduceTCP -benchtime 300x -count 5 ./internal/member/
func BenchmarkSmallAllReduceTCP(b *testing.B) {
	const nodes = 8
	ms := joinMembers(b, nodes, quietLog())
	ctx := benchContext(b, benchTimeout)
	src := make([]byte, benchSmallSize)
	for i := 0; i < len(src); i += 4 {
		binary.LittleEndian.PutUint32(src[i:], math.Float32bits(1))
	}
	sources := make([][]string, b.N)
	targets := benchIDs(b, b.N, "small-reduce-sum", func(string) bool { return true })
	for n := range b.N {
		for k := range nodes {
			id := fmt.Sprintf("small-reduce-%d-%d", n, k)
			if err := ms[k].Client().Put(ctx, id, src); err != nil {
				b.Fatalf("put %s: %v", id, err)
			}
			sources[n] = append(sources[n], id)
		}
	}
	c0 := ms[0].Client()
	lat := make([]time.Duration, 0, b.N)
	cpu0 := processCPU(b)
	b.ResetTimer()
	for n := range b.N {
		rctx, cancel := context.WithTimeout(ctx, benchTimeout)
		t0 := time.Now()
		_, err := c0.AllReduce(rctx, targets[n], sources[n], nodes, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		lat = append(lat, time.Since(t0))
		cancel()
		if err != nil {
			b.Fatalf("reduce into %s: %v", targets[n], err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	reportLatency(b, lat)
	got, err := c0.Get(ctx, targets[b.N-1])
	if err != nil {
		b.Fatal(err)
	}
	if v := math.Float32frombits(binary.LittleEndian.Uint32(got)); v != nodes {
		b.Fatalf("the last sum's first element is %v, want %d", v, nodes)
	}
}
