package member

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"syscall"
	"testing"
	"time"
)

// getProfile is where BenchmarkInlineGetRemoteShard writes a CPU profile
// of its Gets alone (-cpuprofile would also take the cluster's start and
// the Puts).
var getProfile = flag.String("getprofile", "", "write a CPU profile of BenchmarkInlineGetRemoteShard's Gets (BenchmarkInlineGetVsPing's Gets and pings) to this file, and the allocations before and after them to this file .allocs0 and .allocs1 (pprof -diff_base)")

// blockLog makes BenchmarkInlineGetVsPing log every block's p50s, CPU
// and page faults per op beside the heap's state, to tell a start-up
// transient from a cost the whole run pays (a new process's first run
// pays its fresh heap pages throughout).
var blockLog = flag.Bool("blocklog", false, "log BenchmarkInlineGetVsPing's p50, CPU and minor page faults per op of each block of 100 Gets and 100 pings, and the heap's live, goal, free and released bytes")

// writeAllocs writes the allocation profile so far to file. The profile
// is as of the last collection, so it collects first: without, the
// profiles before and after the Gets were the same.
func writeAllocs(tb testing.TB, file string) {
	runtime.GC()
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

// minorFaults is how many minor page faults this process has taken.
func minorFaults(tb testing.TB) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatalf("getrusage: %v", err)
	}
	return ru.Minflt
}

// BenchmarkInlineGetRemoteShard is the cost of a Get of a 1 KiB (inline)
// object that node 0 put and whose directory shard is on node 0, from
// node 1, which has never fetched it: the Locate crosses the data plane
// to node 0's member and comes back with the bytes. Every Get is of a
// new id. Besides ns/op (sequential, so also the latency) it reports the
// process's CPU time per Get (both members run in this process, so it
// covers the caller's side and the shard's) and the p50 and p99 latency.
//
//	go test -run x -bench InlineGetRemoteShard -benchtime 3000x -count 5 ./internal/member/
func BenchmarkInlineGetRemoteShard(b *testing.B) {
	l := benchCluster(b, Config{Nodes: 2, Shards: 8})
	// Ids whose shard node 1 does not host; shards are placed by
	// hashing, so some candidates are skipped.
	ctx := benchContext(b, benchTimeout)
	m1 := l.Member(1)
	ids := benchIDs(b, b.N, "inline", func(id string) bool { return m1.ShardOwner(id) != m1.ID() })
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

// BenchmarkInlineGetVsPing times, side by side, a Get of a new 1 KiB
// (inline) object whose directory shard is on the other member and the
// data plane's bare control round trip between the same two members
// (Member.PingData, the `data-rtt` floor of `hoplite bench`): two
// members in this process, on the TCP data plane over loopback (as
// `hoplite node` members), in alternating blocks of 100 so that both
// meet the same machine. It reports each one's p50 and CPU per op (the
// process's: both members, both sides of the call, the kernel's loopback
// included) and their ratios: what a Get costs beyond the one round trip
// it needs. Each block's objects are Put before it and deleted after it,
// untimed, as in `hoplite bench`: a heap that only grew would charge the
// Gets the page faults of fresh memory. get-faults/op counts the minor
// page faults per Get: a new process's first run takes about 3 (every
// small allocation until its first collection, 128 MiB of allocation
// away behind the warm memory, is a page never touched), later runs
// reuse what the collections freed and take well under 1; that is
// the first run's extra cost.
//
//	go test -run '^$' -bench InlineGetVsPing -benchtime 5000x -count 5 ./internal/member/
func BenchmarkInlineGetVsPing(b *testing.B) {
	m0, m1 := joinPair(b, quietLog(), nil)
	ctx := benchContext(b, benchTimeout)
	ids := benchIDs(b, b.N, "inline", func(id string) bool { return m1.ShardOwner(id) == m0.ID() })
	data := make([][]byte, b.N)
	base := randomBytes(7, benchSmallSize)
	for i := range data {
		data[i] = benchSmallPayload(base, i)
	}
	c0, c1 := m0.Client(), m1.Client()
	addr := m0.DataAddress()
	const block = 100
	var getLat, pingLat []time.Duration
	var getCPU, pingCPU time.Duration
	var getFaults int64
	if *getProfile != "" {
		// Gets, pings, Puts and Deletes: a ping's path is PingData's.
		f, err := os.Create(*getProfile)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			b.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for lo := 0; lo < b.N; lo += block {
		hi := min(lo+block, b.N)
		b.StopTimer()
		for i := lo; i < hi; i++ {
			if err := c0.Put(ctx, ids[i], data[i]); err != nil {
				b.Fatalf("put %s: %v", ids[i], err)
			}
		}
		b.StartTimer()
		flt0 := minorFaults(b)
		cpu0 := processCPU(b)
		getLat = append(getLat, timedGets(b, ctx, c1, ids[lo:hi], data[lo:hi])...)
		cpu1 := processCPU(b)
		flt1 := minorFaults(b)
		for range hi - lo {
			pctx, cancel := context.WithTimeout(ctx, benchTimeout)
			t0 := time.Now()
			err := m1.PingData(pctx, addr)
			pingLat = append(pingLat, time.Since(t0))
			cancel()
			if err != nil {
				b.Fatalf("ping %s: %v", addr, err)
			}
		}
		cpu2 := processCPU(b)
		flt2 := minorFaults(b)
		getFaults += flt1 - flt0
		getCPU += cpu1 - cpu0
		pingCPU += cpu2 - cpu1
		if *blockLog {
			n := time.Duration(hi - lo)
			rs := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/goal:bytes"},
				{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
			metrics.Read(rs)
			b.Logf("N=%d block %d: get p50 %v cpu %v faults %.1f, ping p50 %v cpu %v faults %.1f; heap live %d MiB, %d GCs, goal %d MiB, free %d MiB, released %d MiB", b.N, lo/block,
				medianOf(getLat[lo:hi]), (cpu1-cpu0)/n, float64(flt1-flt0)/float64(n), medianOf(pingLat[lo:hi]), (cpu2-cpu1)/n, float64(flt2-flt1)/float64(n),
				rs[0].Value.Uint64()>>20, rs[1].Value.Uint64(), rs[2].Value.Uint64()>>20, rs[3].Value.Uint64()>>20, rs[4].Value.Uint64()>>20)
		}
		b.StopTimer()
		for i := lo; i < hi; i++ {
			if err := c0.Delete(ctx, ids[i]); err != nil {
				b.Fatalf("delete %s: %v", ids[i], err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	p50 := func(lat []time.Duration) float64 {
		slices.Sort(lat)
		return float64(lat[len(lat)/2].Nanoseconds())
	}
	gp, pp := p50(getLat), p50(pingLat)
	gc, pc := float64(getCPU.Nanoseconds())/float64(b.N), float64(pingCPU.Nanoseconds())/float64(b.N)
	b.ReportMetric(gp, "get-p50-ns")
	b.ReportMetric(pp, "ping-p50-ns")
	b.ReportMetric(gp/pp, "get/ping-p50")
	b.ReportMetric(gc, "get-cpu-ns")
	b.ReportMetric(pc, "ping-cpu-ns")
	b.ReportMetric(gc/pc, "get/ping-cpu")
	b.ReportMetric(float64(getFaults)/float64(b.N), "get-faults/op")
}

// medianOf is the middle of lat (a sorted copy's).
func medianOf(lat []time.Duration) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[len(s)/2]
}

// benchIDs returns the first n of the ids prefix-0, prefix-1, ... that
// want takes (ids whose shard is on a chosen member: shards are placed by
// hashing, so some candidates are skipped), or fails tb after
// 100·n+1000 candidates.
func benchIDs(tb testing.TB, n int, prefix string, want func(id string) bool) []string {
	tb.Helper()
	ids := make([]string, 0, n)
	for i := 0; len(ids) < n; i++ {
		if i > 100*n+1000 {
			tb.Fatalf("%d of %d %s ids found: no member hosts the wanted shards", len(ids), n, prefix)
		}
		if id := fmt.Sprintf("%s-%d", prefix, i); want(id) {
			ids = append(ids, id)
		}
	}
	return ids
}
