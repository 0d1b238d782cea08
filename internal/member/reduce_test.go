package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// End-to-end tests of Reduce and AllReduce on embedded clusters. Results
// are checked against a reference reduction computed here, independently
// of the kernels, over exactly the ids the reply says were reduced.
//
// Tolerances for floating point (the tree's association order is not
// reported, so the reference cannot reproduce it):
//   - MIN and MAX are exact for every dtype.
//   - SUM: any association order of k terms is within (k-1)·u·Σ|x| of the
//     exact sum (u: 2^-53 for float64, 2^-24 for float32). The test allows
//     1e-9·k·Σ|x| for float64 and 1e-6·k·Σ|x| for float32, both well above
//     that bound and far below the smallest term (|x| >= 0.5), so a
//     missing or doubled term is always caught.
//   - PROD: the relative error of k factors is below (k-1)·u; the test
//     allows 1e-12·k·|ref| (float64) and 1e-6·k·|ref| (float32), while
//     every factor has 1.25 <= |x| < 2, so a missing or doubled factor
//     changes the result by at least 25%.
//   - Integer SUM and PROD wrap around and are exact in any order; PROD
//     uses odd factors so that every factor stays visible modulo 2^w.

const rdPrefix = "\x00reduce/"

var (
	allOps    = []messages.ReduceOp{messages.ReduceOp_SUM, messages.ReduceOp_MIN, messages.ReduceOp_MAX, messages.ReduceOp_PROD}
	allDtypes = []messages.DType{messages.DType_FLOAT32, messages.DType_FLOAT64, messages.DType_INT32, messages.DType_INT64}
)

func rdWidth(dt messages.DType) int {
	if dt == messages.DType_FLOAT32 || dt == messages.DType_INT32 {
		return 4
	}
	return 8
}

// rdData returns elems random elements of dt suited to op (see above).
// One draw makes an element (a float's fraction from the top 53 bits, its
// sign from the lowest): under -race each call into the generator costs
// more than the element, and the largest tests draw millions of them.
func rdData(rng *rand.Rand, op messages.ReduceOp, dt messages.DType, elems int) []byte {
	w := rdWidth(dt)
	b := make([]byte, elems*w)
	for i := 0; i < elems; i++ {
		u := rng.Uint64()
		var f float64
		if dt == messages.DType_FLOAT32 || dt == messages.DType_FLOAT64 {
			f = float64(u>>11) / (1 << 53) // in [0, 1)
			if op == messages.ReduceOp_PROD {
				f = 1.25 + 0.75*f
			} else {
				f = 0.5 + f
			}
			if u&1 == 0 {
				f = -f
			}
		} else if op == messages.ReduceOp_PROD {
			u |= 1
		}
		switch dt {
		case messages.DType_FLOAT32:
			binary.LittleEndian.PutUint32(b[i*4:], math.Float32bits(float32(f)))
		case messages.DType_FLOAT64:
			binary.LittleEndian.PutUint64(b[i*8:], math.Float64bits(f))
		case messages.DType_INT32:
			binary.LittleEndian.PutUint32(b[i*4:], uint32(u))
		case messages.DType_INT64:
			binary.LittleEndian.PutUint64(b[i*8:], u)
		}
	}
	return b
}

func rdFloat(dt messages.DType, b []byte, i int) float64 {
	if dt == messages.DType_FLOAT32 {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[i*4:])))
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b[i*8:]))
}

func rdInt(dt messages.DType, b []byte, i int) int64 {
	if dt == messages.DType_INT32 {
		return int64(int32(binary.LittleEndian.Uint32(b[i*4:])))
	}
	return int64(binary.LittleEndian.Uint64(b[i*8:]))
}

// rdOp is a op b in T's own arithmetic (integers wrap; float MIN and MAX
// propagate NaN, as Go's min and max do).
func rdOp[T int32 | int64 | float32 | float64](op messages.ReduceOp, a, b T) T {
	switch op {
	case messages.ReduceOp_SUM:
		return a + b
	case messages.ReduceOp_PROD:
		return a * b
	case messages.ReduceOp_MIN:
		return min(a, b)
	}
	return max(a, b)
}

// rdCheck asserts that got is the reduction with op of exactly inputs.
func rdCheck(t *testing.T, op messages.ReduceOp, dt messages.DType, got []byte, inputs [][]byte) {
	t.Helper()
	if len(inputs) == 0 {
		t.Fatal("no inputs to check against")
	}
	if len(got) != len(inputs[0]) {
		t.Fatalf("result has %d bytes, sources %d", len(got), len(inputs[0]))
	}
	w := rdWidth(dt)
	k := float64(len(inputs))
	for i := 0; i < len(got)/w; i++ {
		switch dt {
		case messages.DType_INT32, messages.DType_INT64:
			acc := rdInt(dt, inputs[0], i)
			for _, in := range inputs[1:] {
				if dt == messages.DType_INT32 {
					acc = int64(rdOp(op, int32(acc), int32(rdInt(dt, in, i))))
				} else {
					acc = rdOp(op, acc, rdInt(dt, in, i))
				}
			}
			if g := rdInt(dt, got, i); g != acc {
				t.Fatalf("%v %v element %d: got %d, want %d", op, dt, i, g, acc)
			}
		default:
			ref, abs := rdFloat(dt, inputs[0], i), math.Abs(rdFloat(dt, inputs[0], i))
			for _, in := range inputs[1:] {
				x := rdFloat(dt, in, i)
				abs += math.Abs(x)
				switch op {
				case messages.ReduceOp_SUM:
					ref += x
				case messages.ReduceOp_PROD:
					ref *= x
				case messages.ReduceOp_MIN:
					ref = min(ref, x)
				case messages.ReduceOp_MAX:
					ref = max(ref, x)
				}
			}
			g := rdFloat(dt, got, i)
			var tol float64
			f32 := dt == messages.DType_FLOAT32
			switch op {
			case messages.ReduceOp_SUM:
				tol = 1e-9 * k * abs
				if f32 {
					tol = 1e-6 * k * abs
				}
			case messages.ReduceOp_PROD:
				tol = 1e-12 * k * math.Abs(ref)
				if f32 {
					tol = 1e-6 * k * math.Abs(ref)
				}
			}
			if math.Abs(g-ref) > tol || math.IsNaN(g) {
				t.Fatalf("%v %v element %d: got %v, want %v (tolerance %g, %d terms)", op, dt, i, g, ref, tol, len(inputs))
			}
		}
	}
}

// rdPut puts data as id on node i.
func rdPut(t *testing.T, ctx context.Context, l *Local, i int, id string, data []byte) {
	t.Helper()
	if err := l.Client(i).Put(ctx, id, data); err != nil {
		t.Fatalf("put %s on node %d: %v", id, i, err)
	}
}

// rdNoIntermediates waits until no store holds an intermediate output.
func rdNoIntermediates(t *testing.T, l *Local) {
	t.Helper()
	end := time.Now().Add(5 * time.Second)
	for {
		var left []string
		for i := 0; i < l.Nodes(); i++ {
			for _, o := range l.Store(i).Objects() {
				if strings.HasPrefix(o.ID(), rdPrefix) {
					left = append(left, fmt.Sprintf("node %d: %q", i, o.ID()))
				}
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("intermediate reduce outputs never freed: %v", left)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// rdNoCopy waits until no store holds id.
func rdNoCopy(t *testing.T, l *Local, id string) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("every copy of %q to be dropped", id), func() bool {
		for i := 0; i < l.Nodes(); i++ {
			if l.Store(i).Lookup(id) != nil {
				return false
			}
		}
		return true
	})
}

// rdNodeIndex maps a node id ("node-3") to its index.
func rdNodeIndex(t *testing.T, id string) int {
	t.Helper()
	var i int
	if _, err := fmt.Sscanf(id, "node-%d", &i); err != nil {
		t.Fatalf("node id %q: %v", id, err)
	}
	return i
}

// rdRootNode is the index of the node that produced the target.
func rdRootNode(t *testing.T, r *messages.ReduceReply) int {
	t.Helper()
	for _, p := range r.GetPlan().GetPositions() {
		if p.GetParent() == -1 && r.GetPlan().GetShape() != reduction.ShapeInline {
			return rdNodeIndex(t, p.GetNodeId())
		}
	}
	return -1
}

// rdCheckSets asserts that reduced and unreduced partition sources, that
// len(reduced) == num and that nothing is reduced twice; it returns the
// data of the reduced ids.
func rdCheckSets(t *testing.T, r *messages.ReduceReply, sources []string, num int, data map[string][]byte) [][]byte {
	t.Helper()
	red, un := r.GetReducedIds(), r.GetUnreducedIds()
	if len(red) != num {
		t.Fatalf("reduced %d ids %v, want %d", len(red), red, num)
	}
	seen := map[string]bool{}
	var inputs [][]byte
	for _, id := range red {
		if seen[id] || !slices.Contains(sources, id) {
			t.Fatalf("reduced ids %v: %q twice or not a source", red, id)
		}
		seen[id] = true
		inputs = append(inputs, data[id])
	}
	for _, id := range un {
		if seen[id] || !slices.Contains(sources, id) {
			t.Fatalf("unreduced ids %v: %q reduced too, twice, or not a source", un, id)
		}
		seen[id] = true
	}
	if len(seen) != len(sources) {
		t.Fatalf("reduced %v + unreduced %v do not cover the sources %v", red, un, sources)
	}
	return inputs
}

// rdCheckPlan asserts the reported plan is the planner's tree for its own
// L, B and S (so it can be reconstructed exactly).
func rdCheckPlan(t *testing.T, pl *messages.ReducePlan, n int, wantShape string, wantDegree int) {
	t.Helper()
	if pl.GetShape() != wantShape {
		t.Fatalf("plan shape %q, want %q", pl.GetShape(), wantShape)
	}
	if wantShape == reduction.ShapeInline {
		if len(pl.GetPositions()) != n {
			t.Fatalf("inline plan lists %d positions, want %d", len(pl.GetPositions()), n)
		}
		return
	}
	L, B, S := time.Duration(pl.GetLatencyNs()), pl.GetBandwidth(), pl.GetObjectSize()
	var tree *plan.Tree
	var err error
	switch {
	case wantShape == reduction.ShapeChainLeaf:
		tree, err = plan.NewChainLeafTree(n, plan.ChainLength(n, L, B, S))
	case wantDegree > 0:
		tree, err = plan.NewTree(n, wantDegree)
	default:
		d, _ := plan.ChooseDegree(n, L, B, S, n)
		tree, err = plan.NewTree(n, d)
	}
	if err != nil {
		t.Fatal(err)
	}
	if int(pl.GetDegree()) != tree.Degree() {
		t.Fatalf("plan degree %d, want %d", pl.GetDegree(), tree.Degree())
	}
	if len(pl.GetPositions()) != n {
		t.Fatalf("plan has %d positions, want %d", len(pl.GetPositions()), n)
	}
	for p, pos := range pl.GetPositions() {
		if int(pos.GetPosition()) != p || int(pos.GetParent()) != tree.Parent(p) || int(pos.GetArrival()) != p || pos.GetObjectId() == "" {
			t.Fatalf("plan position %d = %v, want parent %d", p, pos, tree.Parent(p))
		}
	}
}

// TestReduceExact reduces random arrays put in random order with random
// delays; the target must be the reduction of exactly the reported ids.
func TestReduceExact(t *testing.T) {
	type tc struct {
		seed  uint64
		nodes int
		chunk int
		dt    messages.DType
		op    messages.ReduceOp
	}
	cases := []tc{
		{1, 8, 64 << 10, messages.DType_INT64, messages.ReduceOp_SUM},
		{2, 10, 64 << 10, messages.DType_FLOAT64, messages.ReduceOp_SUM},
		{3, 9, 10007, messages.DType_INT64, messages.ReduceOp_SUM}, // chunks split elements
		{4, 10, 10007, messages.DType_FLOAT64, messages.ReduceOp_SUM},
		{5, 8, 64 << 10, messages.DType_INT64, messages.ReduceOp_MAX},
		{6, 9, 32 << 10, messages.DType_FLOAT64, messages.ReduceOp_MIN},
		{7, 10, 64 << 10, messages.DType_FLOAT32, messages.ReduceOp_SUM},
		{8, 8, 64 << 10, messages.DType_INT64, messages.ReduceOp_SUM},
		{9, 8, 64 << 10, messages.DType_INT64, messages.ReduceOp_SUM}, // 2 MiB sources
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed%d-%v-%v-chunk%d", c.seed, c.op, c.dt, c.chunk), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(c.seed, 99))
			l := start(t, Config{Nodes: c.nodes, ChunkSize: c.chunk})
			ctx := deadline(t, 9*time.Second)
			// 70 KiB .. 230 KiB, never a multiple of the chunk size.
			elems := (70<<10)/rdWidth(c.dt) + rng.IntN(20000)
			if c.seed == 9 {
				elems = 1<<18 + 3
			}
			for (elems*rdWidth(c.dt))%c.chunk == 0 {
				elems++
			}
			num := 1 + rng.IntN(c.nodes)
			if c.seed == 8 {
				num = c.nodes // every source
			}
			sources := make([]string, c.nodes)
			data := map[string][]byte{}
			for i := range sources {
				sources[i] = fmt.Sprintf("x%d-%d", c.seed, i)
				data[sources[i]] = rdData(rng, c.op, c.dt, elems)
			}
			caller := rng.IntN(c.nodes)
			order := rng.Perm(c.nodes)
			delays := make([]time.Duration, c.nodes)
			for i := range delays {
				delays[i] = time.Duration(rng.IntN(21)) * time.Millisecond
			}

			type result struct {
				r   *messages.ReduceReply
				err error
			}
			res := make(chan result, 1)
			go func() {
				r, err := l.Client(caller).Reduce(ctx, "sum", sources, num, c.op, c.dt)
				res <- result{r, err}
			}()
			var puts sync.WaitGroup
			putErr := make(chan error, c.nodes)
			puts.Add(1)
			go func() {
				defer puts.Done()
				for k, i := range order {
					time.Sleep(delays[k])
					if err := l.Client(i).Put(ctx, sources[i], data[sources[i]]); err != nil {
						putErr <- fmt.Errorf("put %s: %w", sources[i], err)
						return
					}
				}
			}()
			var got result
			select {
			case got = <-res:
			case <-ctx.Done():
				t.Fatal("no reply to the Reduce")
			}
			puts.Wait()
			close(putErr)
			for err := range putErr {
				t.Fatal(err)
			}
			if got.err != nil {
				t.Fatalf("reduce: %v", got.err)
			}
			if got.r.GetTargetId() != "sum" {
				t.Fatalf("reply target %q", got.r.GetTargetId())
			}
			inputs := rdCheckSets(t, got.r, sources, num, data)
			rdCheckPlan(t, got.r.GetPlan(), num, reduction.ShapeDAry, 0)
			root := rdRootNode(t, got.r)
			reader := (root + 1 + rng.IntN(c.nodes-1)) % c.nodes
			b, err := l.Client(reader).Get(ctx, "sum")
			if err != nil {
				t.Fatalf("get on node %d: %v", reader, err)
			}
			rdCheck(t, c.op, c.dt, b, inputs)
			rdNoIntermediates(t, l)
		})
	}
}

// TestReduceEveryOpAndDtype runs each op on each dtype once on a small
// tree, with inline-sized and tree-sized sources.
func TestReduceEveryOpAndDtype(t *testing.T) {
	l := start(t, Config{Nodes: 4, ChunkSize: 16 << 10})
	ctx := deadline(t, 9*time.Second)
	rng := rand.New(rand.NewPCG(5, 5))
	for _, size := range []int{1000, 70000} { // both multiples of 8
		for _, op := range allOps {
			for _, dt := range allDtypes {
				name := fmt.Sprintf("%v-%v-%d", op, dt, size)
				t.Run(name, func(t *testing.T) {
					var sources []string
					data := map[string][]byte{}
					for i := 0; i < 3; i++ {
						id := fmt.Sprintf("%s-src%d", name, i)
						data[id] = rdData(rng, op, dt, size/rdWidth(dt))
						rdPut(t, ctx, l, i, id, data[id])
						sources = append(sources, id)
					}
					target := name + "-out"
					r, err := l.Client(3).Reduce(ctx, target, sources, 3, op, dt)
					if err != nil {
						t.Fatal(err)
					}
					inputs := rdCheckSets(t, r, sources, 3, data)
					shape := reduction.ShapeDAry
					if size < 64<<10 {
						shape = reduction.ShapeInline
					}
					rdCheckPlan(t, r.GetPlan(), 3, shape, 0)
					b, err := l.Client(rng.IntN(4)).Get(ctx, target)
					if err != nil {
						t.Fatal(err)
					}
					rdCheck(t, op, dt, b, inputs)
				})
			}
		}
	}
	rdNoIntermediates(t, l)
}

// TestReduceSubsetFirstArrivals: 6 of 10, the Reduce issued before any
// source exists and the Puts issued one after another, so the arrival
// order is the Put order.
//
// The order is made certain, not likely, by message order alone: the
// Puts start once every source's shard has received the coordinator's
// Subscribe (so each Put's registration is pushed to the coordinator, and
// none comes as a replay of an earlier Put), and each Put is followed by
// a wait until the coordinator received that location: the sources'
// shards live on different members, whose updates could otherwise reach
// the coordinator out of Put order.
func TestReduceSubsetFirstArrivals(t *testing.T) {
	for _, size := range []int{4 << 10, 96 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			var mu sync.Mutex
			subscribed := map[string]bool{}
			hook := func(_ string, msg any) {
				if m, ok := msg.(*messages.Subscribe); ok {
					mu.Lock()
					subscribed[m.GetObjectId()] = true
					mu.Unlock()
				}
			}
			heard := map[string]bool{} // sources the coordinator got a location of
			coordHook := func(_ string, msg any) {
				if m, ok := msg.(*messages.LocationUpdate); ok && !m.GetDeleted() && (m.GetNode() != nil || m.GetHasInline()) {
					mu.Lock()
					heard[m.GetObjectId()] = true
					mu.Unlock()
				}
			}
			l := start(t, Config{Nodes: 10, ChunkSize: 32 << 10, hooks: testhooks.Set{Shard: hook, Coordinator: coordHook}})
			ctx := deadline(t, 9*time.Second)
			rng := rand.New(rand.NewPCG(uint64(size), 6))
			// Put order: src-3, src-7, ... (a fixed shuffle of the list).
			sources := make([]string, 10)
			for i := range sources {
				sources[i] = fmt.Sprintf("src-%d", i)
			}
			putOrder := []int{3, 7, 0, 9, 5, 1, 8, 2, 6, 4}
			data := map[string][]byte{}
			for _, id := range sources {
				data[id] = rdData(rng, messages.ReduceOp_SUM, messages.DType_INT64, size/8)
			}
			type result struct {
				r   *messages.ReduceReply
				err error
			}
			res := make(chan result, 1)
			go func() {
				r, err := l.Client(0).Reduce(ctx, "subset", sources, 6, messages.ReduceOp_SUM, messages.DType_INT64)
				res <- result{r, err}
			}()
			eventually(t, 5*time.Second, "the coordinator's subscriptions to every source", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(subscribed) == len(sources)
			})
			for k, i := range putOrder {
				rdPut(t, ctx, l, i, sources[i], data[sources[i]])
				if k >= 6 {
					continue // the Reduce may be over: nobody listens
				}
				eventually(t, 5*time.Second, "the coordinator's news of "+sources[i], func() bool {
					mu.Lock()
					defer mu.Unlock()
					return heard[sources[i]]
				})
			}
			var got result
			select {
			case got = <-res:
			case <-ctx.Done():
				t.Fatal("no reply")
			}
			if got.err != nil {
				t.Fatal(got.err)
			}
			var first, last []string
			for k, i := range putOrder {
				if k < 6 {
					first = append(first, sources[i])
				} else {
					last = append(last, sources[i])
				}
			}
			red, un := slices.Sorted(slices.Values(got.r.GetReducedIds())), slices.Sorted(slices.Values(got.r.GetUnreducedIds()))
			slices.Sort(first)
			slices.Sort(last)
			if !slices.Equal(red, first) || !slices.Equal(un, last) {
				t.Fatalf("reduced %v unreduced %v, want the first six Puts %v and the last four %v", red, un, first, last)
			}
			inputs := rdCheckSets(t, got.r, sources, 6, data)
			b, err := l.Client(9).Get(ctx, "subset")
			if err != nil {
				t.Fatal(err)
			}
			rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, b, inputs)
			// The unreduced sources are untouched, valid objects.
			for _, id := range last {
				if b, err := l.Client(0).Get(ctx, id); err != nil || !bytes.Equal(b, data[id]) {
					t.Fatalf("backup %s: %v", id, err)
				}
			}
			rdNoIntermediates(t, l)
		})
	}
}

// TestReduceForcedShapes: the reduce-degree and reduce-shape experiments decide the
// tree; the result stays exact.
func TestReduceForcedShapes(t *testing.T) {
	const nodes = 8
	for _, tc := range []struct {
		degree int
		shape  string
	}{{1, ""}, {2, ""}, {3, ""}, {nodes, ""}, {0, reduction.ShapeChainLeaf}} {
		t.Run(fmt.Sprintf("d%d%s", tc.degree, tc.shape), func(t *testing.T) {
			l := start(t, Config{exp: experiments.Set{ReduceDegree: tc.degree, ReduceShape: tc.shape}, Nodes: nodes, ChunkSize: 32 << 10})
			ctx := deadline(t, 9*time.Second)
			rng := rand.New(rand.NewPCG(uint64(tc.degree), 7))
			var sources []string
			data := map[string][]byte{}
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("f%d", i)
				data[id] = rdData(rng, messages.ReduceOp_SUM, messages.DType_INT32, 25001)
				rdPut(t, ctx, l, i, id, data[id])
				sources = append(sources, id)
			}
			for _, num := range []int{nodes, 5} {
				target := fmt.Sprintf("forced-%d", num)
				r, err := l.Client(num%nodes).Reduce(ctx, target, sources, num, messages.ReduceOp_SUM, messages.DType_INT32)
				if err != nil {
					t.Fatalf("num %d: %v", num, err)
				}
				shape := reduction.ShapeDAry
				if tc.shape != "" {
					shape = tc.shape
				}
				rdCheckPlan(t, r.GetPlan(), num, shape, min(tc.degree, num))
				if tc.degree > 0 && int(r.GetPlan().GetDegree()) != min(tc.degree, num) {
					t.Fatalf("degree %d, want %d", r.GetPlan().GetDegree(), min(tc.degree, num))
				}
				inputs := rdCheckSets(t, r, sources, num, data)
				b, err := l.Client((num+3)%nodes).Get(ctx, target)
				if err != nil {
					t.Fatal(err)
				}
				rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT32, b, inputs)
			}
			rdNoIntermediates(t, l)
		})
	}
}

// rdGate blocks the Put of one source after its first chunk until opened.
type rdGate struct {
	id   string
	open chan struct{}
	once sync.Once
}

func newRDGate(t *testing.T, id string) *rdGate {
	g := &rdGate{id: id, open: make(chan struct{})}
	t.Cleanup(g.release) // never leave a Put blocked
	return g
}

func (g *rdGate) release() { g.once.Do(func() { close(g.open) }) }

func (g *rdGate) hook(_ string, id string, off int64) {
	if id == g.id && off > 0 {
		select {
		case <-g.open:
		case <-time.After(8 * time.Second):
		}
	}
}

// rdPartialSomewhere waits until some store holds id, still incomplete.
func rdPartialSomewhere(t *testing.T, l *Local, id string) {
	t.Helper()
	eventually(t, 5*time.Second, fmt.Sprintf("a partial copy of %q", id), func() bool {
		for i := 0; i < l.Nodes(); i++ {
			if o := l.Store(i).Lookup(id); o != nil {
				if w, done, err := o.Progress(); w > 0 && !done && err == nil {
					return true
				}
			}
		}
		return false
	})
}

// TestReduceComposition: Reduce(B) takes the target of Reduce(A) as a
// source while A is still being produced, and Gets of both targets issued
// before they are complete return the right bytes.
func TestReduceComposition(t *testing.T) {
	const chunk = 16 << 10
	gate := newRDGate(t, "a-3")
	l := start(t, Config{Nodes: 8, ChunkSize: chunk, hooks: testhooks.Set{Store: storeactor.Hooks{BeforePutChunk: gate.hook}}})
	ctx := deadline(t, 9*time.Second)
	rng := rand.New(rand.NewPCG(8, 8))
	const elems = 16 << 10 // 128 KiB of int64: 8 chunks
	data := map[string][]byte{}
	for _, id := range []string{"a-0", "a-1", "a-2", "a-3", "b-0", "b-1"} {
		data[id] = rdData(rng, messages.ReduceOp_SUM, messages.DType_INT64, elems)
	}
	// A Get of A issued before A's Reduce even starts waits for it.
	type got struct {
		b   []byte
		err error
	}
	earlyGet := make(chan got, 1)
	go func() {
		b, err := l.Client(7).Get(ctx, "A")
		earlyGet <- got{b, err}
	}()
	eventually(t, 5*time.Second, "the early Get to wait on node 7", func() bool { return l.Store(7).Lookup("A") != nil })
	for i := 0; i < 3; i++ {
		rdPut(t, ctx, l, i, fmt.Sprintf("a-%d", i), data[fmt.Sprintf("a-%d", i)])
	}
	putA3 := make(chan error, 1)
	go func() { putA3 <- l.Client(3).Put(ctx, "a-3", data["a-3"]) }()

	type red struct {
		r   *messages.ReduceReply
		err error
	}
	redA, redB := make(chan red, 1), make(chan red, 1)
	aSources := []string{"a-0", "a-1", "a-2", "a-3"}
	go func() {
		r, err := l.Client(4).Reduce(ctx, "A", aSources, 4, messages.ReduceOp_SUM, messages.DType_INT64)
		redA <- red{r, err}
	}()
	// A streams: its target exists but cannot finish while a-3 is gated.
	rdPartialSomewhere(t, l, "A")
	rdPut(t, ctx, l, 5, "b-0", data["b-0"])
	rdPut(t, ctx, l, 6, "b-1", data["b-1"])
	bSources := []string{"b-0", "A", "b-1"}
	go func() {
		r, err := l.Client(7).Reduce(ctx, "B", bSources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
		redB <- red{r, err}
	}()
	// B streams from the partial A.
	rdPartialSomewhere(t, l, "B")
	midGet := make(chan got, 1)
	go func() {
		b, err := l.Client(6).Get(ctx, "B")
		midGet <- got{b, err}
	}()
	select {
	case r := <-redA:
		t.Fatalf("Reduce(A) returned while a source was still being put: %v %v", r.r, r.err)
	case r := <-redB:
		t.Fatalf("Reduce(B) returned while A was still being produced: %v %v", r.r, r.err)
	default:
	}
	gate.release()

	var ra, rb red
	for _, w := range []struct {
		ch  chan red
		dst *red
	}{{redA, &ra}, {redB, &rb}} {
		select {
		case *w.dst = <-w.ch:
		case <-ctx.Done():
			t.Fatal("no reply")
		}
		if w.dst.err != nil {
			t.Fatal(w.dst.err)
		}
	}
	if err := <-putA3; err != nil {
		t.Fatal(err)
	}
	aInputs := rdCheckSets(t, ra.r, aSources, 4, data)
	aBytes, err := l.Client(0).Get(ctx, "A")
	if err != nil {
		t.Fatal(err)
	}
	rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, aBytes, aInputs)
	data["A"] = aBytes
	bInputs := rdCheckSets(t, rb.r, bSources, 3, data)
	bBytes, err := l.Client(1).Get(ctx, "B")
	if err != nil {
		t.Fatal(err)
	}
	// B = b-0 + b-1 + a-0 + a-1 + a-2 + a-3, each once.
	rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, bBytes, bInputs)
	rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, bBytes, [][]byte{data["b-0"], data["b-1"], data["a-0"], data["a-1"], data["a-2"], data["a-3"]})
	for what, ch := range map[string]chan got{"early Get of A": earlyGet, "Get of B while produced": midGet} {
		select {
		case g := <-ch:
			if g.err != nil {
				t.Fatalf("%s: %v", what, g.err)
			}
			want := aBytes
			if strings.Contains(what, "B") {
				want = bBytes
			}
			if !bytes.Equal(g.b, want) {
				t.Fatalf("%s returned different bytes", what)
			}
		case <-ctx.Done():
			t.Fatalf("%s never returned", what)
		}
	}
	rdNoIntermediates(t, l)
}

// TestReduceGetWhileProducing: a Get of a target that is being produced
// (a source's Put is held back, so the root cannot finish) returns the
// final bytes.
func TestReduceGetWhileProducing(t *testing.T) {
	for _, degree := range []int{1, 2} {
		t.Run(fmt.Sprint(degree), func(t *testing.T) {
			gate := newRDGate(t, "g-2")
			l := start(t, Config{exp: experiments.Set{ReduceDegree: degree}, Nodes: 5, ChunkSize: 8 << 10, hooks: testhooks.Set{Store: storeactor.Hooks{BeforePutChunk: gate.hook}}})
			ctx := deadline(t, 9*time.Second)
			rng := rand.New(rand.NewPCG(9, uint64(degree)))
			data := map[string][]byte{}
			sources := []string{"g-0", "g-1", "g-2", "g-3"}
			for _, id := range sources {
				data[id] = rdData(rng, messages.ReduceOp_MAX, messages.DType_FLOAT64, 12<<10)
			}
			putG2 := make(chan error, 1)
			go func() { putG2 <- l.Client(2).Put(ctx, "g-2", data["g-2"]) }()
			for i, id := range sources {
				if id != "g-2" {
					rdPut(t, ctx, l, i, id, data[id])
				}
			}
			type red struct {
				r   *messages.ReduceReply
				err error
			}
			res := make(chan red, 1)
			go func() {
				r, err := l.Client(0).Reduce(ctx, "G", sources, 4, messages.ReduceOp_MAX, messages.DType_FLOAT64)
				res <- red{r, err}
			}()
			rdPartialSomewhere(t, l, "G")
			type got struct {
				b   []byte
				err error
			}
			gets := make(chan got, 1)
			go func() {
				b, err := l.Client(4).Get(ctx, "G")
				gets <- got{b, err}
			}()
			gate.release()
			var r red
			select {
			case r = <-res:
			case <-ctx.Done():
				t.Fatal("no reply")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if err := <-putG2; err != nil {
				t.Fatal(err)
			}
			var g got
			select {
			case g = <-gets:
			case <-ctx.Done():
				t.Fatal("the Get never returned")
			}
			if g.err != nil {
				t.Fatal(g.err)
			}
			rdCheck(t, messages.ReduceOp_MAX, messages.DType_FLOAT64, g.b, rdCheckSets(t, r.r, sources, 4, data))
			rdNoIntermediates(t, l)
		})
	}
}

// TestReduceTargetIsAnOrdinaryObject: the target broadcasts, serves as a
// source of another Reduce, and can be deleted.
func TestReduceTargetIsAnOrdinaryObject(t *testing.T) {
	for _, size := range []int{8 << 10, 200 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			l := start(t, Config{Nodes: 6, ChunkSize: 32 << 10})
			ctx := deadline(t, 9*time.Second)
			rng := rand.New(rand.NewPCG(10, uint64(size)))
			data := map[string][]byte{}
			sources := []string{"o-0", "o-1", "o-2"}
			for i, id := range append(slices.Clone(sources), "extra") {
				data[id] = rdData(rng, messages.ReduceOp_SUM, messages.DType_INT64, size/8)
				rdPut(t, ctx, l, i, id, data[id])
			}
			r, err := l.Client(0).Reduce(ctx, "T", sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
			if err != nil {
				t.Fatal(err)
			}
			inputs := rdCheckSets(t, r, sources, 3, data)
			var wg sync.WaitGroup
			results := make([][]byte, l.Nodes())
			errs := make([]error, l.Nodes())
			for i := 1; i < l.Nodes(); i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i], errs[i] = l.Client(i).Get(ctx, "T")
				}()
			}
			wg.Wait()
			for i := 1; i < l.Nodes(); i++ {
				if errs[i] != nil {
					t.Fatalf("get on node %d: %v", i, errs[i])
				}
				rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, results[i], inputs)
			}
			data["T"] = results[1]
			r2, err := l.Client(5).Reduce(ctx, "U", []string{"T", "extra"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
			if err != nil {
				t.Fatal(err)
			}
			u, err := l.Client(2).Get(ctx, "U")
			if err != nil {
				t.Fatal(err)
			}
			rdCheck(t, messages.ReduceOp_SUM, messages.DType_INT64, u, rdCheckSets(t, r2, []string{"T", "extra"}, 2, data))
			if err := l.Client(3).Delete(ctx, "T"); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, 5} {
				if _, err := l.Client(i).Get(ctx, "T"); !errors.Is(err, messages.ErrDeleted) {
					t.Fatalf("get of deleted target on node %d: %v, want DELETED", i, err)
				}
			}
			rdNoCopy(t, l, "T")
			// A deleted target cannot be produced again.
			if _, err := l.Client(1).Reduce(ctx, "T", sources, 3, messages.ReduceOp_SUM, messages.DType_INT64); err == nil {
				t.Fatal("a Reduce recreated a deleted target")
			}
			rdNoIntermediates(t, l)
		})
	}
}

// TestAllReduce: afterwards every node that held a reduced source has the
// complete target in its own store.
func TestAllReduce(t *testing.T) {
	for _, size := range []int{4 << 10, 150 << 10} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			const nodes = 8
			l := start(t, Config{Nodes: nodes, ChunkSize: 32 << 10})
			ctx := deadline(t, 9*time.Second)
			rng := rand.New(rand.NewPCG(11, uint64(size)))
			data := map[string][]byte{}
			var sources []string
			where := map[string]int{}
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("ar-%d", i)
				data[id] = rdData(rng, messages.ReduceOp_SUM, messages.DType_FLOAT32, size/4)
				rdPut(t, ctx, l, i, id, data[id])
				sources = append(sources, id)
				where[id] = i
			}
			r, err := l.Client(0).AllReduce(ctx, "all", sources, 6, messages.ReduceOp_SUM, messages.DType_FLOAT32)
			if err != nil {
				t.Fatal(err)
			}
			inputs := rdCheckSets(t, r, sources, 6, data)
			for _, id := range r.GetReducedIds() {
				i := where[id]
				o := l.Store(i).Lookup("all")
				if o == nil {
					t.Fatalf("node %d held reduced source %s but has no copy of the target after AllReduce", i, id)
				}
				if _, done, err := o.Progress(); !done || err != nil {
					t.Fatalf("node %d: target copy incomplete (done %v, err %v) after AllReduce", i, done, err)
				}
				b, err := o.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				rdCheck(t, messages.ReduceOp_SUM, messages.DType_FLOAT32, b, inputs)
			}
			rdNoIntermediates(t, l)
		})
	}
}

// rdNoTrace asserts that a failed Reduce left nothing of target behind:
// no copy in any store, no intermediate, and the id is free for a Put.
func rdNoTrace(t *testing.T, ctx context.Context, l *Local, target string) {
	t.Helper()
	rdNoCopy(t, l, target)
	rdNoIntermediates(t, l)
	fresh := []byte("fresh object under the failed target id")
	if err := l.Client(1).Put(ctx, target, fresh); err != nil {
		t.Fatalf("put of the failed target id: %v", err)
	}
	if b, err := l.Client(2).Get(ctx, target); err != nil || !bytes.Equal(b, fresh) {
		t.Fatalf("get of the re-put target: %v", err)
	}
}

// TestReduceBadInput: every invalid Reduce fails with its code and leaves
// no partial target or intermediate behind.
func TestReduceBadInput(t *testing.T) {
	l := start(t, Config{exp: experiments.Set{ReduceDegree: 1}, Nodes: 4, ChunkSize: 16 << 10})
	ctx := deadline(t, 9*time.Second)
	big := func(seed uint64, n int) []byte { return randomBytes(seed, n) }
	rdPut(t, ctx, l, 0, "p0", big(1, 80<<10))
	rdPut(t, ctx, l, 1, "p1", big(2, 80<<10))
	rdPut(t, ctx, l, 2, "p2", big(3, 80<<10))
	rdPut(t, ctx, l, 3, "q-big", big(4, 96<<10))
	rdPut(t, ctx, l, 3, "s-1008", big(5, 1008))
	rdPut(t, ctx, l, 0, "s0", big(6, 1000))
	rdPut(t, ctx, l, 1, "s1", big(7, 1000))
	rdPut(t, ctx, l, 2, "twelve-a", big(8, 12))
	rdPut(t, ctx, l, 3, "twelve-b", big(9, 12))
	sum, i64 := messages.ReduceOp_SUM, messages.DType_INT64
	// Counts that an int32 conversion would wrap into valid ones (computed
	// at run time: as constants they would not compile where int is 32 bits).
	wrapsTo1, wrapsTo2 := int(int64(1)<<32+1), int(-(int64(1)<<32)+2)

	for _, tc := range []struct {
		name    string
		target  string
		sources []string
		num     int
		op      messages.ReduceOp
		dt      messages.DType
		want    error
		names   []string // ids the message must name
	}{
		{"num 0", "bad-num0", []string{"p0", "p1"}, 0, sum, i64, messages.ErrInvalidArgument, nil},
		{"num > len", "bad-num3", []string{"p0", "p1"}, 3, sum, i64, messages.ErrInvalidArgument, nil},
		{"num 1<<32+1", "bad-num-wrap", []string{"p0", "p1"}, wrapsTo1, sum, i64, messages.ErrInvalidArgument, nil},
		{"num -(1<<32)+2", "bad-num-wrap-neg", []string{"p0", "p1"}, wrapsTo2, sum, i64, messages.ErrInvalidArgument, nil},
		{"duplicate", "bad-dup", []string{"p0", "p1", "p0"}, 2, sum, i64, messages.ErrInvalidArgument, []string{"p0"}},
		{"target is a source", "p1", []string{"p0", "p1"}, 2, sum, i64, messages.ErrInvalidArgument, []string{"p1"}},
		{"NUL source", "bad-nul", []string{"p0", rdPrefix + "x"}, 1, sum, i64, messages.ErrInvalidArgument, nil},
		{"unknown op", "bad-op", []string{"p0", "p1"}, 2, 77, i64, messages.ErrInvalidArgument, nil},
		{"no op", "bad-op0", []string{"p0", "p1"}, 2, messages.ReduceOp_REDUCE_OP_UNSPECIFIED, i64, messages.ErrInvalidArgument, nil},
		{"unknown dtype", "bad-dt", []string{"p0", "p1"}, 2, sum, 9, messages.ErrInvalidArgument, nil},
		{"sizes differ (tree)", "bad-size", []string{"p0", "q-big"}, 2, sum, i64, messages.ErrInvalidArgument, []string{"p0", "q-big"}},
		{"sizes differ (inline)", "bad-size-inline", []string{"s0", "s-1008"}, 2, sum, i64, messages.ErrInvalidArgument, []string{"s0", "s-1008"}},
		{"sizes differ (inline vs tree)", "bad-size-mixed", []string{"s0", "p2"}, 2, sum, i64, messages.ErrInvalidArgument, []string{"s0", "p2"}},
		{"12 bytes of int64", "bad-width", []string{"twelve-a", "twelve-b"}, 2, sum, i64, messages.ErrInvalidArgument, nil},
		{"12 bytes of int64, one of two", "bad-width-1", []string{"twelve-a", "twelve-b"}, 1, sum, i64, messages.ErrInvalidArgument, nil},
		{"12 bytes of float64", "bad-width-f", []string{"twelve-b"}, 1, sum, messages.DType_FLOAT64, messages.ErrInvalidArgument, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := l.Client(1).Reduce(ctx, tc.target, tc.sources, tc.num, tc.op, tc.dt)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v (reply %v), want %v", err, r, tc.want)
			}
			if r == nil || r.GetTargetId() != tc.target || len(r.GetReducedIds()) != 0 {
				t.Fatalf("failed reply %v", r)
			}
			for _, id := range tc.names {
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", id)) {
					t.Fatalf("error %q does not name %q", err, id)
				}
			}
			if tc.target != "p1" {
				rdNoTrace(t, ctx, l, tc.target)
			} else if b, err := l.Client(3).Get(ctx, "p1"); err != nil || !bytes.Equal(b, big(2, 80<<10)) {
				t.Fatalf("the source named as target changed: %v", err)
			}
		})
	}

	t.Run("allreduce num 1<<32+1", func(t *testing.T) {
		r, err := l.Client(1).AllReduce(ctx, "bad-all-wrap", []string{"p0", "p1"}, wrapsTo1, sum, i64)
		if !errors.Is(err, messages.ErrInvalidArgument) || r == nil || r.GetTargetId() != "bad-all-wrap" || len(r.GetReducedIds()) != 0 {
			t.Fatalf("got %v (reply %v), want INVALID_ARGUMENT", err, r)
		}
		rdNoTrace(t, ctx, l, "bad-all-wrap")
	})

	t.Run("target exists", func(t *testing.T) {
		rdPut(t, ctx, l, 2, "exists", big(10, 80<<10))
		_, err := l.Client(0).Reduce(ctx, "exists", []string{"p0", "p1"}, 2, sum, i64)
		if !errors.Is(err, messages.ErrConflict) {
			t.Fatalf("got %v, want CONFLICT", err)
		}
		if b, err := l.Client(3).Get(ctx, "exists"); err != nil || !bytes.Equal(b, big(10, 80<<10)) {
			t.Fatalf("the existing target changed: %v", err)
		}
		rdNoIntermediates(t, l)
	})

	t.Run("concurrent same target", func(t *testing.T) {
		errs := make(chan error, 2)
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := l.Client(i).Reduce(ctx, "twice", []string{"p0", "p1", "p2"}, 3, sum, i64)
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		ok, conflict := 0, 0
		for err := range errs {
			switch {
			case err == nil:
				ok++
			case errors.Is(err, messages.ErrConflict):
				conflict++
			default:
				t.Fatalf("unexpected error %v", err)
			}
		}
		if ok != 1 || conflict != 1 {
			t.Fatalf("%d succeeded and %d conflicted, want one each", ok, conflict)
		}
		b, err := l.Client(3).Get(ctx, "twice")
		if err != nil {
			t.Fatal(err)
		}
		rdCheck(t, sum, i64, b, [][]byte{big(1, 80<<10), big(2, 80<<10), big(3, 80<<10)})
		rdNoIntermediates(t, l)
	})

	t.Run("size mismatch after a task started", func(t *testing.T) {
		// In the forced chain the second arrival starts position 1; the
		// third source then has another size.
		rdPut(t, ctx, l, 0, "m0", big(11, 80<<10))
		rdPut(t, ctx, l, 1, "m1", big(12, 80<<10))
		res := make(chan error, 1)
		go func() {
			_, err := l.Client(3).Reduce(ctx, "bad-late-size", []string{"m0", "m1", "m2"}, 3, sum, i64)
			res <- err
		}()
		eventually(t, 5*time.Second, "position 1's intermediate output", func() bool {
			for i := 0; i < l.Nodes(); i++ {
				for _, o := range l.Store(i).Objects() {
					if strings.HasPrefix(o.ID(), rdPrefix+"bad-late-size") {
						return true
					}
				}
			}
			return false
		})
		rdPut(t, ctx, l, 2, "m2", big(13, 88<<10))
		var err error
		select {
		case err = <-res:
		case <-ctx.Done():
			t.Fatal("no reply")
		}
		if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), `"m2"`) {
			t.Fatalf("got %v, want INVALID_ARGUMENT naming m2", err)
		}
		rdNoTrace(t, ctx, l, "bad-late-size")
	})

	t.Run("timeout names the missing ids", func(t *testing.T) {
		// Sent as a message with its own timeout_ms, answered well before
		// the request's own deadline.
		req := &messages.Reduce{TargetId: "bad-timeout", SourceIds: []string{"p0", "never-1", "p1", "never-2"},
			NumObjects: 3, Op: sum, Dtype: i64, TimeoutMs: 300}
		res, err := l.System().Root.RequestFuture(l.StoreNode(2), req, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		r, ok := res.(*messages.ReduceReply)
		if !ok {
			t.Fatalf("reply %T", res)
		}
		rdCheckTimeout(t, messages.ErrOrNil(r.GetError()), []string{"never-1", "never-2"}, []string{"p0", "p1"})
		rdNoTrace(t, ctx, l, "bad-timeout")
	})

	t.Run("deleted source", func(t *testing.T) {
		rdPut(t, ctx, l, 0, "del-0", big(14, 80<<10))
		res := make(chan error, 1)
		go func() {
			_, err := l.Client(3).Reduce(ctx, "bad-deleted", []string{"del-0", "del-1", "del-2"}, 3, sum, i64)
			res <- err
		}()
		// With del-0 gone only two sources can ever exist, whether the
		// coordinator saw del-0 before or after it was deleted.
		if err := l.Client(1).Delete(ctx, "del-0"); err != nil {
			t.Fatal(err)
		}
		var err error
		select {
		case err = <-res:
		case <-ctx.Done():
			t.Fatal("no reply")
		}
		if !errors.Is(err, messages.ErrDeleted) || !strings.Contains(err.Error(), `"del-0"`) {
			t.Fatalf("got %v, want DELETED naming del-0", err)
		}
		rdNoTrace(t, ctx, l, "bad-deleted")
	})
	rdNoIntermediates(t, l)
}

// TestReduceClientDeadlineNamesMissing: a Client.Reduce whose deadline
// passes before enough sources appear fails with the coordinator's TIMEOUT
// naming the missing ids, even when the request takes a few milliseconds
// to reach the node (here a hook holds it 5 ms in the node's mailbox, as
// a busy node or a network hop would).
func TestReduceClientDeadlineNamesMissing(t *testing.T) {
	delay := func(_ string, msg any) {
		if m, ok := msg.(*messages.Reduce); ok && m.GetTargetId() == "late" {
			time.Sleep(5 * time.Millisecond)
		}
	}
	l := start(t, Config{Nodes: 3, hooks: testhooks.Set{Store: storeactor.Hooks{BeforeReceive: delay}}})
	ctx := deadline(t, 9*time.Second)
	rdPut(t, ctx, l, 0, "here", randomBytes(1, 80<<10))
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := l.Client(1).Reduce(cctx, "late", []string{"never-3", "here", "never-4"}, 2, messages.ReduceOp_SUM, messages.DType_INT64)
	rdCheckTimeout(t, err, []string{"never-3", "never-4"}, []string{"here"})
	rdNoTrace(t, ctx, l, "late")
}

// rdCheckTimeout asserts a TIMEOUT whose message lists exactly missing.
func rdCheckTimeout(t *testing.T, err error, missing, present []string) {
	t.Helper()
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("got %v, want TIMEOUT", err)
	}
	msg := err.Error()
	i := strings.Index(msg, "missing: ")
	if i < 0 {
		t.Fatalf("timeout %q does not list the missing sources", msg)
	}
	got := strings.Split(msg[i+len("missing: "):], ", ")
	slices.Sort(got)
	want := slices.Sorted(slices.Values(missing))
	if !slices.Equal(got, want) {
		t.Fatalf("timeout lists %q missing, want exactly %q (present: %q)", got, want, present)
	}
}

// TestReduceFromApplicationActor: an actor sends messages.Reduce to a
// store node and receives the ReduceReply.
func TestReduceFromApplicationActor(t *testing.T) {
	l := start(t, Config{Nodes: 3, ChunkSize: 32 << 10})
	ctx := deadline(t, 9*time.Second)
	rng := rand.New(rand.NewPCG(12, 12))
	data := map[string][]byte{}
	sources := []string{"app-0", "app-1", "app-2"}
	for i, id := range sources {
		data[id] = rdData(rng, messages.ReduceOp_MIN, messages.DType_INT32, 20000)
		rdPut(t, ctx, l, i, id, data[id])
	}
	replies := make(chan *messages.ReduceReply, 1)
	props := actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Request(l.StoreNode(1), &messages.Reduce{TargetId: "app-min", SourceIds: sources, NumObjects: 2,
				Op: messages.ReduceOp_MIN, Dtype: messages.DType_INT32, TimeoutMs: 5000})
		case *messages.ReduceReply:
			replies <- m
		}
	})
	pid := l.System().Root.Spawn(props)
	t.Cleanup(func() { l.System().Root.Stop(pid) })
	var r *messages.ReduceReply
	select {
	case r = <-replies:
	case <-ctx.Done():
		t.Fatal("the application actor got no ReduceReply")
	}
	if err := messages.ErrOrNil(r.GetError()); err != nil {
		t.Fatal(err)
	}
	if r.GetTargetId() != "app-min" {
		t.Fatalf("reply for %q", r.GetTargetId())
	}
	b, err := l.Client(0).Get(ctx, "app-min")
	if err != nil {
		t.Fatal(err)
	}
	rdCheck(t, messages.ReduceOp_MIN, messages.DType_INT32, b, rdCheckSets(t, r, sources, 2, data))
	rdNoIntermediates(t, l)
}
