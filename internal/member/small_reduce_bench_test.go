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

// BenchmarkSmallReduce is the cost of a Reduce (float32 SUM) of eight
// 1 KiB (inline) sources, one put on each of 8 members, called on member
// 0: the coordinator subscribes to the sources' shards on the data plane
// and gets their bytes in the answers. Every Reduce is of new sources
// and a new target. The coordinator runs on the member of the target's
// shard: at-caller picks targets whose shard is on member 0 (as the
// testbed's bench does), elsewhere targets whose shard is on another
// member, where the StartReduce, the result's StoreReduced and its
// reply, and the ReduceReply are Proto.Actor remote messages. Besides
// ns/op (sequential, so also the latency) it reports the process's CPU
// time per Reduce (every member runs in this process) and the p50 and
// p99 latency.
//
//	go test -run '^$' -bench SmallReduce -benchtime 500x -count 5 ./internal/member/
func BenchmarkSmallReduce(b *testing.B) {
	b.Run("at-caller", func(b *testing.B) { benchSmallReduce(b, true, false) })
	b.Run("elsewhere", func(b *testing.B) { benchSmallReduce(b, false, false) })
}

// BenchmarkSmallAllReduce is BenchmarkSmallReduce's at-caller case as an
// AllReduce: the coordinator also pushes the result to the seven other
// participants, and the call returns once each holds it.
//
//	go test -run '^$' -bench SmallAllReduce -benchtime 500x -count 5 ./internal/member/
func BenchmarkSmallAllReduce(b *testing.B) { benchSmallReduce(b, true, true) }

func benchSmallReduce(b *testing.B, atCaller, all bool) {
	const nodes = 8
	l := benchCluster(b, Config{Nodes: nodes})
	ctx := benchContext(b, benchTimeout)
	src := make([]byte, benchSmallSize)
	for i := 0; i < len(src); i += 4 {
		binary.LittleEndian.PutUint32(src[i:], math.Float32bits(1))
	}
	m0 := l.Member(0)
	sources := make([][]string, b.N)
	targets := benchIDs(b, b.N, "small-reduce-sum", func(id string) bool { return (m0.ShardOwner(id) == m0.ID()) == atCaller })
	for n := range b.N {
		for k := range nodes {
			id := fmt.Sprintf("small-reduce-%d-%d", n, k)
			if err := l.Client(k).Put(ctx, id, src); err != nil {
				b.Fatalf("put %s: %v", id, err)
			}
			sources[n] = append(sources[n], id)
		}
	}
	c0 := l.Client(0)
	lat := make([]time.Duration, 0, b.N)
	cpu0 := processCPU(b)
	b.ResetTimer()
	for n := range b.N {
		rctx, cancel := context.WithTimeout(ctx, benchTimeout)
		t0 := time.Now()
		var err error
		if all {
			_, err = c0.AllReduce(rctx, targets[n], sources[n], nodes, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		} else {
			_, err = c0.Reduce(rctx, targets[n], sources[n], nodes, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		}
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
