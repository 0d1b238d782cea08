package member

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkActorPutRemoteShard is the design card's own path for a small
// object: a Put message of 1 KiB, sent as an actor request from the
// member's own actor system (as an application actor spawned there with
// Member.Spawn sends it) to its store node, of an object whose directory
// shard is on the other member, two members in this process on the TCP
// data plane (as `hoplite node` members). Each Put is of a new id, each
// deleted after its block of 100, untimed. It reports the process's CPU
// per Put (both members: the caller's node and the shard's) and the p50
// and p99 latency.
//
//	go test -run '^$' -bench ActorPutRemoteShard -benchtime 3000x -count 5 ./internal/member/
func BenchmarkActorPutRemoteShard(b *testing.B) {
	m0, m1 := joinPair(b, quietLog(), nil)
	ctx := benchContext(b, benchTimeout)
	ids := benchIDs(b, b.N, "actorput", func(id string) bool { return m0.ShardOwner(id) == m1.ID() })
	base := randomBytes(7, benchSmallSize)
	root, node := m0.System().Root, m0.StoreNode()
	c0 := m0.Client()
	const block = 100
	lat := make([]time.Duration, 0, b.N)
	var cpu time.Duration
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += block {
		hi := min(lo+block, b.N)
		cpu0 := processCPU(b)
		for i := lo; i < hi; i++ {
			pctx, cancel := context.WithTimeout(ctx, benchTimeout)
			t0 := time.Now()
			res, err := actorutil.Request(pctx, root, node, &messages.Put{ObjectId: ids[i], Data: benchSmallPayload(base, i)})
			lat = append(lat, time.Since(t0))
			cancel()
			if err != nil {
				b.Fatalf("put %s: %v", ids[i], err)
			}
			if r, ok := res.(*messages.PutReply); !ok || r.GetError() != nil {
				b.Fatalf("put %s: %v", ids[i], res)
			}
		}
		cpu += processCPU(b) - cpu0
		b.StopTimer()
		for i := lo; i < hi; i++ {
			if err := c0.Delete(ctx, ids[i]); err != nil {
				b.Fatalf("delete %s: %v", ids[i], err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	reportLatency(b, lat)
}
