package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/storenode"
)

// Benchmarks of the embedded cluster. None of them runs without -bench.
//
//	go test -run x -bench . -benchtime 3x ./internal/member/
//	go test -run x -bench SmallGet -benchtime 2000x ./internal/member/

const (
	benchSmallSize = 1 << 10  // inline objects (below the 64 KiB default)
	benchBigSize   = 64 << 20 // broadcast and transfer objects
	benchCapacity  = 512 << 20
	benchGbit      = 125e6 // bytes/s: a 1 Gbit/s link
	benchTimeout   = 2 * time.Minute
	benchNodes     = 8
)

// benchCluster starts an embedded cluster that is stopped when tb's run
// ends (for a benchmark: after each b.N round).
func benchCluster(tb testing.TB, cfg Config) *Local {
	tb.Helper()
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	l, err := StartLocal(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(l.Stop)
	return l
}

// benchContext is a context with a deadline, canceled when tb's run ends.
func benchContext(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(tb.Context(), d)
	tb.Cleanup(cancel)
	return ctx
}

// benchSmallPayload is the content of small object i: distinct per id.
func benchSmallPayload(base []byte, i int) []byte {
	p := bytes.Clone(base)
	binary.LittleEndian.PutUint64(p, uint64(i))
	return p
}

// benchPutSmall puts n distinct small objects on node 0 (a few at a time)
// and returns their ids and contents.
func benchPutSmall(b *testing.B, l *Local, prefix string, n int) ([]string, [][]byte) {
	b.Helper()
	ctx := benchContext(b, benchTimeout)
	base := randomBytes(7, benchSmallSize)
	ids, data := make([]string, n), make([][]byte, n)
	for i := range n {
		ids[i], data[i] = fmt.Sprintf("%s-%d", prefix, i), benchSmallPayload(base, i)
	}
	c0 := l.Client(0)
	const workers = 8
	var (
		wg    sync.WaitGroup
		first atomic.Value
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := c0.Put(ctx, ids[i], data[i]); err != nil {
					first.CompareAndSwap(nil, fmt.Errorf("put %s: %w", ids[i], err))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		b.Fatal(err)
	}
	return ids, data
}

// reportLatency reports the nearest-rank p50 and p99 of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p*float64(len(lat)))) - 1
		return lat[min(max(i, 0), len(lat)-1)]
	}
	b.ReportMetric(float64(rank(0.50).Nanoseconds()), "p50-ns/op")
	b.ReportMetric(float64(rank(0.99).Nanoseconds()), "p99-ns/op")
}

// timedGets Gets each of ids in turn through c, checks it against data,
// and returns each Get's latency.
func timedGets(b *testing.B, ctx context.Context, c *storenode.Client, ids []string, data [][]byte) []time.Duration {
	b.Helper()
	lat := make([]time.Duration, 0, len(ids))
	for i, id := range ids {
		gctx, cancel := context.WithTimeout(ctx, benchTimeout)
		t0 := time.Now()
		got, err := c.Get(gctx, id)
		lat = append(lat, time.Since(t0))
		cancel()
		if err != nil {
			b.Fatalf("get %s: %v", id, err)
		}
		if !bytes.Equal(got, data[i]) {
			b.Fatalf("get %s: wrong bytes", id)
		}
	}
	return lat
}

// BenchmarkSmallGetInline measures the sequential latency of a Get of a
// 1 KiB (inline) object put on another node. first: every Get is of an id
// never fetched on the reading node (a directory round trip that returns
// the inline bytes); cached: the same id again (served from the reading
// node's own copy).
func BenchmarkSmallGetInline(b *testing.B) {
	b.Run("first", func(b *testing.B) {
		l := benchCluster(b, Config{Nodes: 2})
		ids, data := benchPutSmall(b, l, "small", b.N)
		b.SetBytes(benchSmallSize)
		b.ResetTimer()
		lat := timedGets(b, b.Context(), l.Client(1), ids, data)
		b.StopTimer()
		reportLatency(b, lat)
	})
	b.Run("cached", func(b *testing.B) {
		l := benchCluster(b, Config{Nodes: 2})
		ids, data := benchPutSmall(b, l, "small", 1)
		id, want := ids[0], data[0]
		c1 := l.Client(1)
		if _, err := c1.Get(benchContext(b, benchTimeout), id); err != nil {
			b.Fatal(err)
		}
		if l.Store(1).Lookup(id) == nil {
			b.Fatalf("node 1 did not cache inline object %s", id)
		}
		lat := make([]time.Duration, 0, b.N)
		b.SetBytes(benchSmallSize)
		b.ResetTimer()
		for range b.N {
			ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
			t0 := time.Now()
			got, err := c1.Get(ctx, id)
			lat = append(lat, time.Since(t0))
			cancel()
			if err != nil {
				b.Fatalf("get %s: %v", id, err)
			}
			if !bytes.Equal(got, want) {
				b.Fatalf("get %s: wrong bytes", id)
			}
		}
		b.StopTimer()
		reportLatency(b, lat)
	})
}

// benchParallelism is RunParallel's goroutines per GOMAXPROCS: Gets wait
// on actor hops, so more requests in flight than cores.
const benchParallelism = 8

// BenchmarkSmallGetInlineParallel is the throughput of concurrent small
// Gets on one node (ops/s; ns/op is its inverse).
func BenchmarkSmallGetInlineParallel(b *testing.B) {
	for _, v := range []struct {
		name string
		cfg  Config
	}{{"first", Config{Nodes: 2}}, {"first-actor-locates", Config{exp: experiments.Set{ActorLocates: true}, Nodes: 2}}} {
		b.Run(v.name, func(b *testing.B) { benchSmallGetsParallel(b, v.cfg) })
	}
	b.Run("cached", func(b *testing.B) {
		l := benchCluster(b, Config{Nodes: 2})
		ids, data := benchPutSmall(b, l, "small", 1)
		id, want := ids[0], data[0]
		c1 := l.Client(1)
		if _, err := c1.Get(benchContext(b, benchTimeout), id); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(benchSmallSize)
		b.SetParallelism(benchParallelism)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
				got, err := c1.Get(ctx, id)
				cancel()
				if err != nil {
					b.Errorf("get %s: %v", id, err)
					return
				}
				if !bytes.Equal(got, want) {
					b.Errorf("get %s: wrong bytes", id)
					return
				}
			}
		})
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}

// benchBroadcast puts data as id on node 0 and times concurrent
// GetReadOnly calls on every other node. The timer must be stopped on
// entry; it runs only while the Gets do, and is stopped again on return.
// The received bytes are verified and the object deleted after the timed
// part.
func benchBroadcast(b *testing.B, l *Local, id string, data []byte) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
	defer cancel()
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		b.Fatalf("put %s: %v", id, err)
	}
	got := make([][]byte, l.Nodes())
	errs := make([]error, l.Nodes())
	var wg sync.WaitGroup
	runtime.GC() // start every measurement from a collected heap
	b.StartTimer()
	t0 := time.Now()
	for i := 1; i < l.Nodes(); i++ {
		wg.Go(func() { got[i], errs[i] = l.Client(i).GetReadOnly(ctx, id) })
	}
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()
	for i := 1; i < l.Nodes(); i++ {
		if errs[i] != nil {
			b.Fatalf("node %d: get %s: %v", i, id, errs[i])
		}
		if !bytes.Equal(got[i], data) {
			b.Fatalf("node %d: get %s: wrong bytes", i, id)
		}
	}
	if err := l.Client(0).Delete(ctx, id); err != nil {
		b.Fatalf("delete %s: %v", id, err)
	}
	return elapsed
}

// BenchmarkBroadcast64MiB broadcasts 64 MiB from node 0 to 7 receivers:
// with the broadcast tree and with the naive baseline (everyone fetches
// from the creator), on unlimited and on 1 Gbit/s links. MB/s counts the
// bytes delivered (64 MiB × 7); only the Gets are timed.
func BenchmarkBroadcast64MiB(b *testing.B) {
	for _, mode := range []struct {
		name  string
		naive bool
	}{{"tree", false}, {"naive", true}} {
		for _, link := range []struct {
			name string
			bps  float64
		}{{"mem", 0}, {"1Gbit", benchGbit}} {
			b.Run(mode.name+"/"+link.name, func(b *testing.B) {
				l := benchCluster(b, Config{Nodes: benchNodes, Capacity: benchCapacity,
					exp: experiments.Set{Naive: mode.naive}, LinkBandwidth: link.bps})
				data := randomBytes(1, benchBigSize)
				if link.bps == 0 {
					// Warm up: the first broadcast of a run faults in fresh
					// heap pages for every receiver's buffer, which costs
					// more than the copying itself at memory speed (on a
					// paced link it overlaps the pacing).
					b.StopTimer()
					benchBroadcast(b, l, "bcast-warmup", data)
				}
				b.SetBytes(int64(benchBigSize) * (benchNodes - 1))
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					benchBroadcast(b, l, fmt.Sprintf("bcast-%d", i), data)
				}
			})
		}
	}
}

// BenchmarkBroadcastTreeVsNaive runs a tree and a naive broadcast back to
// back in every iteration (alternating which goes first), each on a fresh
// 1 Gbit/s cluster, and reports naive time / tree time. 64 MiB, or 8 MiB
// with -short. MB/s counts the bytes both broadcasts deliver.
func BenchmarkBroadcastTreeVsNaive(b *testing.B) {
	size := benchBigSize
	if testing.Short() {
		size = 8 << 20
	}
	data := randomBytes(2, size)
	run := func(i int, naive bool) time.Duration {
		b.StopTimer()
		l, err := StartLocal(Config{Nodes: benchNodes, Capacity: benchCapacity,
			exp: experiments.Set{Naive: naive}, LinkBandwidth: benchGbit, Log: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Stop()
		return benchBroadcast(b, l, fmt.Sprintf("cmp-%d", i), data)
	}
	var tree, naive time.Duration
	b.SetBytes(int64(size) * (benchNodes - 1) * 2)
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			tree += run(i, false)
			naive += run(i, true)
		} else {
			naive += run(i, true)
			tree += run(i, false)
		}
	}
	b.ReportMetric(naive.Seconds()/tree.Seconds(), "naive/tree")
	b.ReportMetric(tree.Seconds()*1e3/float64(b.N), "tree-ms/op")
	b.ReportMetric(naive.Seconds()*1e3/float64(b.N), "naive-ms/op")
}

// benchTransfer puts data as id on node 0 and times one Get (or
// GetReadOnly) of it on node 1. Timer: as in benchBroadcast.
//
// The 64 MiB benchmarks at memory speed do one untimed round first:
// otherwise the first timed allocation of each run faults in fresh heap
// pages (about 25 ms for 64 MiB on the 2-core test machine, 5× the copy
// itself) and whichever of transfer or copy comes first pays for it.
func benchTransfer(b *testing.B, l *Local, id string, data []byte, readOnly bool) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
	defer cancel()
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		b.Fatalf("put %s: %v", id, err)
	}
	c1 := l.Client(1)
	get := c1.Get
	if readOnly {
		get = c1.GetReadOnly
	}
	runtime.GC()
	b.StartTimer()
	t0 := time.Now()
	got, err := get(ctx, id)
	elapsed := time.Since(t0)
	b.StopTimer()
	if err != nil {
		b.Fatalf("get %s: %v", id, err)
	}
	if !bytes.Equal(got, data) {
		b.Fatalf("get %s: wrong bytes", id)
	}
	if err := l.Client(0).Delete(ctx, id); err != nil {
		b.Fatalf("delete %s: %v", id, err)
	}
	return elapsed
}

// benchPlainCopy times copying data into a fresh buffer: what one
// transfer would cost at memory speed. Timer: as in benchBroadcast.
func benchPlainCopy(b *testing.B, data []byte) time.Duration {
	b.Helper()
	runtime.GC()
	b.StartTimer()
	t0 := time.Now()
	dst := make([]byte, len(data))
	copy(dst, data)
	elapsed := time.Since(t0)
	b.StopTimer()
	if !bytes.Equal(dst, data) {
		b.Fatal("plain copy differs")
	}
	return elapsed
}

// BenchmarkOneReceiverTransfer moves 64 MiB from node 0 to node 1 on an
// unlimited link, with Get (a private copy) and GetReadOnly, next to a
// plain copy() of the same bytes into a fresh buffer. Only the Get (or the
// copy) is timed.
func BenchmarkOneReceiverTransfer(b *testing.B) {
	for _, mode := range []struct {
		name     string
		readOnly bool
	}{{"get-copy", false}, {"get-readonly", true}} {
		b.Run(mode.name, func(b *testing.B) {
			l := benchCluster(b, Config{Nodes: 2, Capacity: benchCapacity})
			data := randomBytes(3, benchBigSize)
			b.StopTimer()
			benchTransfer(b, l, "one-warmup", data, mode.readOnly) // warm-up: see benchTransfer
			b.SetBytes(benchBigSize)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				benchTransfer(b, l, fmt.Sprintf("one-%d", i), data, mode.readOnly)
			}
		})
	}
	b.Run("plain-copy", func(b *testing.B) {
		data := randomBytes(3, benchBigSize)
		b.StopTimer()
		benchPlainCopy(b, data) // warm-up: see benchTransfer
		b.SetBytes(benchBigSize)
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			benchPlainCopy(b, data)
		}
	})
}

// BenchmarkTransferVsCopy times, in every iteration, one GetReadOnly
// transfer of 64 MiB between two nodes and one plain copy of the same
// bytes (alternating which goes first), and reports their ratio.
func BenchmarkTransferVsCopy(b *testing.B) {
	l := benchCluster(b, Config{Nodes: 2, Capacity: benchCapacity})
	data := randomBytes(4, benchBigSize)
	b.StopTimer()
	benchTransfer(b, l, "tvc-warmup", data, true) // warm-up: see benchTransfer
	benchPlainCopy(b, data)
	var transfer, plain time.Duration
	ratios := make([]float64, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		id := fmt.Sprintf("tvc-%d", i)
		var t, p time.Duration
		if i%2 == 0 {
			t = benchTransfer(b, l, id, data, true)
			p = benchPlainCopy(b, data)
		} else {
			p = benchPlainCopy(b, data)
			t = benchTransfer(b, l, id, data, true)
		}
		transfer, plain = transfer+t, plain+p
		ratios = append(ratios, t.Seconds()/p.Seconds())
	}
	slices.Sort(ratios)
	b.ReportMetric(transfer.Seconds()/plain.Seconds(), "transfer/copy")
	// The median of the per-iteration ratios resists one slow copy on a
	// noisy machine better than the ratio of the totals.
	b.ReportMetric(ratios[len(ratios)/2], "median-transfer/copy")
	b.ReportMetric(float64(benchBigSize)*float64(b.N)/transfer.Seconds()/1e6, "transfer-MB/s")
	b.ReportMetric(float64(benchBigSize)*float64(b.N)/plain.Seconds()/1e6, "copy-MB/s")
}

// BenchmarkStartLocal16 is what an embedded cluster of 16 members costs
// to start (until every member runs the shards placed on it) and stop:
// 16 actor systems with Proto.Actor remote on loopback. The heap figure
// is the live heap with the cluster running.
func BenchmarkStartLocal16(b *testing.B) {
	var heap uint64
	for b.Loop() {
		l, err := StartLocal(Config{Nodes: 16, Log: faultLog()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		heap = max(heap, ms.HeapAlloc)
		b.StartTimer()
		l.Stop()
	}
	b.ReportMetric(float64(heap)/(1<<20), "MiB-heap")
}

// benchSmallGetsParallel times concurrent first Gets of 1 KiB objects
// put on node 0, on node 1 of a cluster of cfg.
func benchSmallGetsParallel(b *testing.B, cfg Config) {
	l := benchCluster(b, cfg)
	ids, data := benchPutSmall(b, l, "small", b.N)
	c1 := l.Client(1)
	var next atomic.Int64
	b.SetBytes(benchSmallSize)
	b.SetParallelism(benchParallelism)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := next.Add(1) - 1
			ctx, cancel := context.WithTimeout(b.Context(), benchTimeout)
			got, err := c1.Get(ctx, ids[i])
			cancel()
			if err != nil {
				b.Errorf("get %s: %v", ids[i], err)
				return
			}
			if !bytes.Equal(got, data[i]) {
				b.Errorf("get %s: wrong bytes", ids[i])
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
