package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// reduceRun is one Reduce measured end to end.
type reduceRun struct {
	Elapsed time.Duration
	Reply   *messages.ReduceReply
	Order   []string // the order the sources were Put in
}

// floatSource returns a float32 array of small integers, so that sums are
// exact in any order and the result can be checked element by element.
func floatSource(seed uint64, size int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := 0; i+4 <= size; i += 4 {
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.IntN(2048))))
	}
	return b
}

// runReduce Puts one float32 source per node, node by node in a shuffled
// order spaced by interval, with the Reduce issued first: sources arrive
// while the tree is being built. It checks the target element by element.
func runReduce(ctx context.Context, l *cluster.Local, target string, size, num int, interval time.Duration, seed uint64) (reduceRun, error) {
	nodes := l.Nodes()
	order := rand.New(rand.NewPCG(seed, 2)).Perm(nodes)
	ids := make([]string, nodes)
	data := make(map[string][]byte, nodes)
	for i := range nodes {
		ids[i] = fmt.Sprintf("%s-src-%d", target, i)
		data[ids[i]] = floatSource(seed*100+uint64(i), size)
	}
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	begin := time.Now()
	go func() {
		r, err := l.Client(0).Reduce(ctx, target, ids, num, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		done <- result{r, err}
	}()
	var wg sync.WaitGroup
	putErr := make(chan error, nodes)
	var put []string
	for k, i := range order {
		if k > 0 && interval > 0 {
			time.Sleep(interval)
		}
		put = append(put, ids[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			putErr <- l.Client(i).Put(ctx, ids[i], data[ids[i]])
		}()
	}
	res := <-done
	elapsed := time.Since(begin)
	wg.Wait()
	close(putErr)
	for err := range putErr {
		if err != nil {
			return reduceRun{}, fmt.Errorf("put: %w", err)
		}
	}
	if res.err != nil {
		return reduceRun{}, res.err
	}
	got, err := l.Client(nodes-1).GetReadOnly(ctx, target)
	if err != nil {
		return reduceRun{}, err
	}
	want := make([]float32, size/4)
	for _, id := range res.r.GetReducedIds() {
		d := data[id]
		for k := range want {
			want[k] += math.Float32frombits(binary.LittleEndian.Uint32(d[4*k:]))
		}
	}
	for k, w := range want {
		if g := math.Float32frombits(binary.LittleEndian.Uint32(got[4*k:])); g != w {
			return reduceRun{}, fmt.Errorf("element %d is %v, want %v", k, g, w)
		}
	}
	return reduceRun{Elapsed: elapsed, Reply: res.r, Order: put}, nil
}

// estimateOrigin says what an estimate of the plan rests on.
func estimateOrigin(samples int64) string {
	switch {
	case samples < 0:
		return "(measured or default)"
	case samples == 0:
		return "default"
	case samples == 1:
		return "measured (1 sample)"
	}
	return fmt.Sprintf("measured (%d samples)", samples)
}

// printPlan shows the tree by arrival and why its degree was chosen.
func printPlan(w io.Writer, p *messages.ReducePlan) {
	b := fmt.Sprintf("%.0f MB/s %s", p.GetBandwidth()/1e6, estimateOrigin(p.GetBandwidthSamples()))
	if p.GetBandwidth() <= 0 {
		b = "unknown (no transfer measured yet: a chain)"
	}
	fmt.Fprintf(w, "  shape %s, degree %d, S = %d MiB, L = %v %s, B = %s\n",
		p.GetShape(), p.GetDegree(), p.GetObjectSize()>>20, time.Duration(p.GetLatencyNs()), estimateOrigin(p.GetLatencySamples()), b)
	if len(p.GetCosts()) > 0 {
		var parts []string
		for _, c := range p.GetCosts() {
			parts = append(parts, fmt.Sprintf("T(%d)=%v", c.GetDegree(), time.Duration(c.GetCostUs())*time.Microsecond))
		}
		fmt.Fprintf(w, "  cost model: %s -> d=%d is the cheapest\n", strings.Join(parts, " "), p.GetDegree())
	}
	children := map[int32][]*messages.ReducePosition{}
	var root *messages.ReducePosition
	for _, pos := range p.GetPositions() {
		if pos.GetParent() < 0 {
			root = pos
		} else {
			children[pos.GetParent()] = append(children[pos.GetParent()], pos)
		}
	}
	var walk func(pos *messages.ReducePosition, indent string)
	walk = func(pos *messages.ReducePosition, indent string) {
		fmt.Fprintf(w, "  %sposition %d: %s on %s (arrival #%d)\n", indent, pos.GetPosition(), pos.GetObjectId(), pos.GetNodeId(), pos.GetArrival()+1)
		kids := children[pos.GetPosition()]
		slices.SortFunc(kids, func(a, b *messages.ReducePosition) int { return int(a.GetPosition() - b.GetPosition()) })
		for _, k := range kids {
			walk(k, indent+"  ")
		}
	}
	if root != nil {
		fmt.Fprintln(w, "  tree (root first; children reduce into their parent):")
		walk(root, "")
	}
}
