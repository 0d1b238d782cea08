package member

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// reduceOnce Puts one float32 source per node (spaced by interval) after
// issuing a Reduce of all of them on node 0, and returns the time from the
// Reduce call to its reply. Sources and target are deleted afterwards.
func reduceOnce(b *testing.B, l *Local, tag string, srcs [][]byte, interval time.Duration) time.Duration {
	d, _ := reduceReply(b, l, tag, srcs, interval)
	return d
}

// reduceReply is reduceOnce that also returns the reply (its plan).
func reduceReply(b *testing.B, l *Local, tag string, srcs [][]byte, interval time.Duration) (time.Duration, *messages.ReduceReply) {
	b.Helper()
	ctx := benchContext(b, 5*time.Minute)
	ids := make([]string, len(srcs))
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-src-%d", tag, i)
	}
	target := tag + "-sum"
	runtime.GC()
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	begin := time.Now()
	go func() {
		r, err := l.Client(0).Reduce(ctx, target, ids, len(ids), messages.ReduceOp_SUM, messages.DType_FLOAT32)
		done <- result{r, err}
	}()
	var wg sync.WaitGroup
	for i := range srcs {
		if i > 0 && interval > 0 {
			time.Sleep(interval)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := l.Client(i%l.Nodes()).Put(ctx, ids[i], srcs[i]); err != nil {
				b.Error(err)
			}
		}()
	}
	res := <-done
	elapsed := time.Since(begin)
	wg.Wait()
	if res.err != nil {
		b.Fatal(res.err)
	}
	for _, id := range append(ids, target) {
		if err := l.Client(0).Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
	return elapsed, res.r
}

// warmUp Puts the sources, waits for every Put, and only then reduces
// them: the Puts measure L (their registrations' round trips), and the
// tree's streams of whole sources measure B. (In reduceOnce the Reduce
// comes first and its leaves are still being Put when their parents
// stream them, which says nothing about the link, so it measures no B.)
// It also faults in the stores' memory.
func warmUp(b *testing.B, l *Local, srcs [][]byte) {
	b.Helper()
	ctx := benchContext(b, 5*time.Minute)
	ids := make([]string, len(srcs))
	for i := range srcs {
		ids[i] = fmt.Sprintf("warm-src-%d", i)
		if err := l.Client(i%l.Nodes()).Put(ctx, ids[i], srcs[i]); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := l.Client(0).Reduce(ctx, "warm-sum", ids, len(ids), messages.ReduceOp_SUM, messages.DType_FLOAT32); err != nil {
		b.Fatal(err)
	}
	for _, id := range append(ids, "warm-sum") {
		if err := l.Client(0).Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

func reduceSources(n, size int) [][]byte {
	srcs := make([][]byte, n)
	for i := range srcs {
		srcs[i] = randomFloat32s(uint64(i), size)
	}
	return srcs
}

// randomFloat32s is incompressible float32 data without NaNs.
func randomFloat32s(seed uint64, size int) []byte {
	b := randomBytes(seed, size)
	for i := 3; i < size; i += 4 {
		b[i] &= 0x3f // exponent below the NaN/Inf range
	}
	return b
}

var reduceLinks = []struct {
	name string
	bw   float64
}{{"mem", 0}, {"1Gbit", 125e6}}

// BenchmarkReduceTreeVsGather reports the gather-at-the-caller time over
// the tree time, both measured in each iteration (interleaved).
func BenchmarkReduceTreeVsGather(b *testing.B) {
	const nodes = 8
	size := 64 << 20
	if testing.Short() {
		size = 8 << 20
	}
	srcs := reduceSources(nodes, size)
	for _, link := range reduceLinks {
		for _, arrival := range []time.Duration{0, 20 * time.Millisecond} {
			b.Run(fmt.Sprintf("%s/interval=%v", link.name, arrival), func(b *testing.B) {
				cfg := Config{Nodes: nodes, LinkBandwidth: link.bw, Capacity: int64(size) * (nodes + 4)}
				tree := benchCluster(b, cfg)
				cfg.exp.Naive = true
				naive := benchCluster(b, cfg)
				var ratios []float64
				var treeTotal time.Duration
				for i := 0; b.Loop(); i++ {
					t := reduceOnce(b, tree, fmt.Sprintf("t%d", i), srcs, arrival)
					g := reduceOnce(b, naive, fmt.Sprintf("g%d", i), srcs, arrival)
					treeTotal += t
					ratios = append(ratios, g.Seconds()/t.Seconds())
				}
				sort.Float64s(ratios)
				b.ReportMetric(ratios[len(ratios)/2], "gather/tree")
				b.ReportMetric(float64(treeTotal.Milliseconds())/float64(len(ratios)), "tree-ms")
			})
		}
	}
}

// BenchmarkReduceDegree compares the degree the cost model chooses with
// forced degrees and with the published code's chain-leaf shape. The
// chosen variant reports the degree the model chose (d) and the B it
// chose it with (B-MB/s, measured in the warm-up); chain-leaf reports its
// top degree (1: S/(B·L) >= n made it one chain).
func BenchmarkReduceDegree(b *testing.B) {
	const nodes = 8
	size := 64 << 20
	if testing.Short() {
		size = 8 << 20
	}
	srcs := reduceSources(nodes, size)
	variants := []struct {
		name   string
		degree int
		shape  string
	}{{"chosen", 0, ""}, {"d=1", 1, ""}, {"d=2", 2, ""}, {"d=n", nodes, ""}, {"chain-leaf", 0, reduction.ShapeChainLeaf}}
	for _, link := range reduceLinks {
		for _, v := range variants {
			b.Run(link.name+"/"+v.name, func(b *testing.B) {
				l := benchCluster(b, Config{Nodes: nodes, LinkBandwidth: link.bw, Capacity: int64(size) * (nodes + 4),
					exp: experiments.Set{ReduceDegree: v.degree, ReduceShape: v.shape}})
				warmUp(b, l, srcs)
				var total time.Duration
				var last *messages.ReduceReply
				n := 0
				for i := 0; b.Loop(); i++ {
					d, r := reduceReply(b, l, fmt.Sprintf("r%d", i), srcs, 0)
					total += d
					last = r
					n++
				}
				b.ReportMetric(float64(total.Milliseconds())/float64(n), "reduce-ms")
				if v.name == "chosen" || v.shape != "" {
					b.ReportMetric(float64(last.GetPlan().GetDegree()), "d")
				}
				if v.name == "chosen" {
					b.ReportMetric(last.GetPlan().GetBandwidth()/1e6, "B-MB/s")
				}
			})
		}
	}
}
