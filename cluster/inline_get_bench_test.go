package cluster

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"syscall"
	"testing"
	"time"
)

// getProfile is where BenchmarkInlineGetRemoteShard writes a CPU profile
// of its Gets alone (-cpuprofile would also take the cluster's start and
// the Puts).
var getProfile = flag.String("getprofile", "", "write a CPU profile of BenchmarkInlineGetRemoteShard's Gets to this file, and the allocations before and after them to this file .allocs0 and .allocs1 (pprof -diff_base)")

// writeAllocs writes the allocation profile so far to file.
func writeAllocs(tb testing.TB, file string) {
	f, err := os.Create(file)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		tb.Fatal(err)
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkInlineGetRemoteShard is the cost of a Get of a 1 KiB (inline)
// object that node 0 put and whose directory shard is on node 0, from
// node 1, which has never fetched it: the Locate crosses the data plane
// to node 0's member and comes back with the bytes. Every Get is of a
// new id. Besides ns/op (sequential, so also the latency) it reports the
// process's CPU time per Get (both members run in this process, so it
// covers the caller's side and the shard's) and the p50 and p99 latency.
//
//	go test -run x -bench InlineGetRemoteShard -benchtime 3000x -count 5 ./cluster/
func BenchmarkInlineGetRemoteShard(b *testing.B) {
	l := benchCluster(b, Config{Nodes: 2, Shards: 8})
	// Ids whose shard node 1 does not host; shards are placed by
	// hashing, so some candidates are skipped.
	ctx := benchContext(b, benchTimeout)
	m1 := l.Member(1)
	ids := make([]string, 0, b.N)
	for i := 0; len(ids) < b.N; i++ {
		if i > 100*b.N+1000 {
			b.Fatalf("node 0 hosts no shard: %d of %d ids found", len(ids), b.N)
		}
		if id := fmt.Sprintf("inline-%d", i); m1.ShardOwner(id) != m1.ID() {
			ids = append(ids, id)
		}
	}
	data := make([][]byte, b.N)
	base := randomBytes(7, benchSmallSize)
	c0 := l.Client(0)
	for i, id := range ids {
		data[i] = benchSmallPayload(base, i)
		if err := c0.Put(ctx, id, data[i]); err != nil {
			b.Fatalf("put %s: %v", id, err)
		}
	}
	c1 := l.Client(1)
	b.SetBytes(benchSmallSize)
	b.ReportAllocs()
	if *getProfile != "" {
		f, err := os.Create(*getProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		writeAllocs(b, *getProfile+".allocs0")
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := processCPU(b)
	b.ResetTimer()
	lat := timedGets(b, ctx, c1, ids, data)
	b.StopTimer()
	if *getProfile != "" {
		writeAllocs(b, *getProfile+".allocs1")
	}
	b.ReportMetric(float64((processCPU(b)-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	reportLatency(b, lat)
}
