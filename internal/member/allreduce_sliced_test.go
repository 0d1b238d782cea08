package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// Tests of the sliced AllReduce (reduce-scatter, then all-gather, through
// the store). Its order of operations is fixed (see coordinator's
// sliced): element j of slice k is s[k] op (s[k-1] op (... op s[k+1])),
// sources indexed by their place in the request, mod n. The reference
// here reduces in exactly that order, in plain Go arithmetic of the
// dtype, so every result, float SUM and PROD included, must match it bit
// for bit.

// slicedRef is the sliced AllReduce's exact result for sources in
// request order. It allocates nothing per element: the exactness test
// folds millions of them, and under -race an allocation each cost the
// test a fifth of its time.
func slicedRef(op messages.ReduceOp, dt messages.DType, sources [][]byte) []byte {
	switch dt {
	case messages.DType_FLOAT32:
		return slicedRefOf(op, sources, 4,
			func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) },
			func(b []byte, v float32) { binary.LittleEndian.PutUint32(b, math.Float32bits(v)) })
	case messages.DType_FLOAT64:
		return slicedRefOf(op, sources, 8,
			func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) },
			func(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) })
	case messages.DType_INT32:
		return slicedRefOf(op, sources, 4,
			func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) },
			func(b []byte, v int32) { binary.LittleEndian.PutUint32(b, uint32(v)) })
	}
	return slicedRefOf(op, sources, 8,
		func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) },
		func(b []byte, v int64) { binary.LittleEndian.PutUint64(b, uint64(v)) })
}

// slicedRefOf is slicedRef in T's own arithmetic, for elements w bytes
// wide that get reads and put writes.
func slicedRefOf[T int32 | int64 | float32 | float64](op messages.ReduceOp, sources [][]byte, w int, get func([]byte) T, put func([]byte, T)) []byte {
	n := len(sources)
	out := make([]byte, len(sources[0]))
	for k, sl := range plan.Slices(int64(len(out)), n, w) {
		for e := sl.Off; e < sl.Off+sl.Len; e += int64(w) {
			// The chain: leaf s[k+1], then each next link's own value op
			// what it received, the root s[k] last.
			acc := get(sources[(k+1)%n][e:])
			for c := 1; c < n; c++ {
				acc = rdOp(op, get(sources[(k+1+c)%n][e:]), acc)
			}
			put(out[e:], acc)
		}
	}
	return out
}

// slicedOp is a op b for one element, in the dtype's own arithmetic.
func slicedOp(op messages.ReduceOp, dt messages.DType, a, b []byte) []byte {
	out := make([]byte, len(a))
	switch dt {
	case messages.DType_FLOAT32:
		r := rdOp(op, math.Float32frombits(binary.LittleEndian.Uint32(a)), math.Float32frombits(binary.LittleEndian.Uint32(b)))
		binary.LittleEndian.PutUint32(out, math.Float32bits(r))
	case messages.DType_FLOAT64:
		r := rdOp(op, math.Float64frombits(binary.LittleEndian.Uint64(a)), math.Float64frombits(binary.LittleEndian.Uint64(b)))
		binary.LittleEndian.PutUint64(out, math.Float64bits(r))
	case messages.DType_INT32:
		binary.LittleEndian.PutUint32(out, uint32(rdOp(op, int32(binary.LittleEndian.Uint32(a)), int32(binary.LittleEndian.Uint32(b)))))
	case messages.DType_INT64:
		binary.LittleEndian.PutUint64(out, uint64(rdOp(op, int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b)))))
	}
	return out
}

// TestSlicedAllReduceExact runs sliced AllReduces of n = 2..8 sources on
// an 8-node cluster, for every dtype and, over the n, every op, at a size whose element
// count no n divides and at one element above the inline limit, and
// checks every participant's copy, and a non-participant's Get, bit for
// bit against slicedRef. The caller is node 7: a participant only when
// n = 8, so the target's creator is the caller's node in one case and
// the first source's in the others.
func TestSlicedAllReduceExact(t *testing.T) {
	t.Parallel()
	const nodes = 8
	l := start(t, Config{exp: experiments.Set{AllReduceShape: reduction.ShapeSliced}, Nodes: nodes})
	ctx := deadline(t, 4*time.Minute)
	rng := rand.New(rand.NewPCG(15, 1))
	limit := 64 << 10 // the default inline limit
	// Every n, with every dtype at both sizes, and each dtype's op turned
	// with n and the size, so that every (dtype, op) pair runs at several
	// n (7 values of n over 4 ops) without the whole product, 224
	// AllReduces: the elementwise kernels are the reduction package's
	// tests'; what this test adds is the slicing and gathers at each n.
	seen := map[[2]int32]int{}
	for n := 2; n <= nodes; n++ {
		for d, dt := range allDtypes {
			w := rdWidth(dt)
			// 32771 is prime: no n divides it, so the slices are uneven.
			for e, elems := range []int{32771, limit/w + 1} {
				op := allOps[(n+d+2*e)%len(allOps)]
				seen[[2]int32{int32(dt), int32(op)}]++
				name := fmt.Sprintf("n%d-%v-%v-%d", n, dt, op, elems)
				var ids []string
				var data [][]byte
				for i := 0; i < n; i++ {
					id := fmt.Sprintf("%s-src%d", name, i)
					b := rdData(rng, op, dt, elems)
					rdPut(t, ctx, l, i, id, b)
					ids, data = append(ids, id), append(data, b)
				}
				target := name + "-all"
				r, err := l.Client(nodes-1).AllReduce(ctx, target, ids, n, op, dt)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if p := r.GetPlan(); p.GetShape() != reduction.ShapeSliced || int(p.GetSlices()) != n || len(p.GetPositions()) != n {
					t.Fatalf("%s: plan shape %q, %d slices, %d positions; want sliced, %d, %d (slice 0's chain)", name, p.GetShape(), p.GetSlices(), len(p.GetPositions()), n, n)
				}
				if !slices.Equal(r.GetReducedIds(), ids) || len(r.GetUnreducedIds()) != 0 {
					t.Fatalf("%s: reduced %v, unreduced %v; want %v", name, r.GetReducedIds(), r.GetUnreducedIds(), ids)
				}
				want := slicedRef(op, dt, data)
				for i := 0; i < n; i++ {
					o := l.Store(i).Lookup(target)
					if o == nil {
						t.Fatalf("%s: participant node %d has no copy of the target", name, i)
					}
					got, err := o.Bytes()
					if err != nil {
						t.Fatalf("%s: node %d's copy: %v", name, i, err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s: node %d's copy differs from the reference at byte %d", name, i, firstDiff(got, want))
					}
				}
				if n < nodes {
					got, err := l.Client(nodes-1).Get(ctx, target)
					if err != nil || !bytes.Equal(got, want) {
						t.Fatalf("%s: Get on a non-participant: err %v, equal %v", name, err, bytes.Equal(got, want))
					}
				}
			}
		}
		rdNoIntermediates(t, l)
	}
	for _, dt := range allDtypes {
		for _, op := range allOps {
			if seen[[2]int32{int32(dt), int32(op)}] == 0 {
				t.Errorf("%v with %v never ran", dt, op)
			}
		}
	}
}

// TestSlicedAllReduceSharedNode: sources that share a node are separate
// participants (a chain link each, a slice each to root), and the node
// gets one copy of the target.
func TestSlicedAllReduceSharedNode(t *testing.T) {
	l := start(t, Config{exp: experiments.Set{AllReduceShape: reduction.ShapeSliced}, Nodes: 3})
	ctx := deadline(t, 60*time.Second)
	rng := rand.New(rand.NewPCG(16, 1))
	var ids []string
	var data [][]byte
	for i, node := range []int{0, 0, 1, 2, 1} {
		id := fmt.Sprintf("shared-%d", i)
		b := rdData(rng, messages.ReduceOp_SUM, messages.DType_FLOAT64, 20011)
		rdPut(t, ctx, l, node, id, b)
		ids, data = append(ids, id), append(data, b)
	}
	r, err := l.Client(2).AllReduce(ctx, "shared-all", ids, len(ids), messages.ReduceOp_SUM, messages.DType_FLOAT64)
	if err != nil {
		t.Fatal(err)
	}
	if r.GetPlan().GetShape() != reduction.ShapeSliced || r.GetPlan().GetSlices() != 5 {
		t.Fatalf("plan %v", r.GetPlan())
	}
	want := slicedRef(messages.ReduceOp_SUM, messages.DType_FLOAT64, data)
	for i := range 3 {
		got, err := l.Client(i).Get(ctx, "shared-all")
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("node %d: err %v, equal %v", i, err, bytes.Equal(got, want))
		}
	}
	rdNoIntermediates(t, l)
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestSlicedAllReduceParticipantKilled kills a participant in the middle
// of a sliced AllReduce: once its chains run (a chain position's output
// exists), once the all-gather runs (a gather's output exists), and once
// a participant's copy is complete (a gather finished) but not all are.
// The coordinator is held at that report until the kill is delivered.
// The chains need every source and have no repair, so the coordinator
// abandons them and reduces, then broadcasts, over the sources that
// still exist: the AllReduce must succeed well before its deadline (a
// TIMEOUT would be the hang this guards against), name exactly the
// survivors' sources as reduced and the victim's as unreduced, leave
// the exact sum of the reduced sources on every surviving participant
// (checked against a reference computed from ReducedIds), and leave no
// intermediate behind. In the last phase the surviving gathers may all
// finish before the failure notice is handled; then the sliced run's
// own answer over every source is the right one.
func TestSlicedAllReduceParticipantKilled(t *testing.T) {
	for _, phase := range []string{"reduce-scatter", "all-gather", "gathered"} {
		t.Run(phase, func(t *testing.T) {
			const nodes, victim = 6, 3
			target := idOnNode("sliced-kill", 0, nodes, nodes) // the coordinator runs on node 0, the caller
			blocked, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			cfg := Config{exp: experiments.Set{AllReduceShape: reduction.ShapeSliced}, Nodes: nodes, ChunkSize: 16 << 10, Log: faultLog()}
			cfg.hooks.Coordinator = func(_ string, msg any) {
				var hold bool
				switch m := msg.(type) {
				case *messages.ReduceTaskStarted:
					hold = phase == "reduce-scatter" && m.GetPosition() < nodes*nodes || phase == "all-gather" && m.GetPosition() >= nodes*nodes
				case *messages.ReduceTaskDone:
					hold = phase == "gathered" && m.GetPosition() >= nodes*nodes
				}
				if !hold {
					return
				}
				// Hold the coordinator until the victim is dead.
				once.Do(func() {
					close(blocked)
					<-resume
				})
			}
			l := start(t, cfg)
			ctx := deadline(t, 60*time.Second)
			var ids []string
			var data [][]byte
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("k%d", i)
				b := int64s(uint64(i+1), 40000) // 320 KB
				rdPut(t, ctx, l, i, id, b)
				ids, data = append(ids, id), append(data, b)
			}
			done := goReduce(ctx, 20*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
				return l.Client(0).AllReduce(rctx, target, ids, nodes, messages.ReduceOp_SUM, messages.DType_INT64)
			})
			select {
			case <-blocked:
			case res := <-done:
				t.Fatalf("the AllReduce ended before the %s began: %v", phase, res.err)
			}
			err := l.Kill(victim)
			close(resume)
			if err != nil {
				t.Fatal(err)
			}
			res := <-done
			if res.err != nil {
				t.Fatalf("AllReduce with participant node-%d killed in the %s: %v", victim, phase, res.err)
			}
			r := res.reply
			byID := map[string][]byte{}
			for i, id := range ids {
				byID[id] = data[i]
			}
			// Once a gather has finished, the others need nothing from
			// the victim but the slice they may already hold: the kill
			// is a system message, but the other gathers' reports can be
			// queued before the failure notice is. If every surviving
			// gather finished first, the sliced run is complete and
			// correct over all the sources; anything else must be the
			// re-plan over the survivors.
			var inputs [][]byte
			switch shape := r.GetPlan().GetShape(); {
			case phase == "gathered" && shape == reduction.ShapeSliced:
				t.Logf("every surviving gather finished before the failure was handled: the sliced answer stands")
				inputs = rdCheckSets(t, r, ids, nodes, byID)
			case shape != reduction.ShapeDAry:
				t.Fatalf("plan shape %q after the kill, want the re-planned %q", shape, reduction.ShapeDAry)
			default:
				inputs = rdCheckSets(t, r, ids, nodes-1, byID)
				if !slices.Equal(r.GetUnreducedIds(), []string{ids[victim]}) {
					t.Fatalf("unreduced %v, want the victim's %s", r.GetUnreducedIds(), ids[victim])
				}
			}
			// The exact sum of what the reply says was reduced (int64
			// SUM: every order gives the same bits).
			want := make([]byte, len(inputs[0]))
			for _, in := range inputs {
				for e := 0; e < len(want); e += 8 {
					binary.LittleEndian.PutUint64(want[e:], binary.LittleEndian.Uint64(want[e:])+binary.LittleEndian.Uint64(in[e:]))
				}
			}
			for i := range nodes {
				if i == victim {
					continue
				}
				o := l.Store(i).Lookup(target)
				if o == nil {
					t.Fatalf("surviving participant node %d has no copy of the target", i)
				}
				got, err := o.Bytes()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("node %d's copy: err %v, equal %v (first difference at byte %d)", i, err, bytes.Equal(got, want), firstDiff(got, want))
				}
				if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Get on node %d: err %v, equal %v", i, err, bytes.Equal(got, want))
				}
			}
			rdNoIntermediates(t, l)
		})
	}
}

// The members keep the cost model from slicing an AllReduce whose slices
// would be under the allocator's large-buffer threshold (their buffers
// are new memory every time): 4 sources of 1 MiB reduce, then broadcast,
// though the model alone slices them; 4 of 16 MiB, slices of 4 MiB, are
// sliced. Both results are exact on every participant.
func TestAllReduceSlicesNoSmallerThanTheAllocatorKeeps(t *testing.T) {
	const nodes = 4
	l := start(t, Config{Nodes: nodes})
	ctx := deadline(t, 2*time.Minute)
	rng := rand.New(rand.NewPCG(16, 1))
	for _, c := range []struct {
		size  int
		shape string
	}{{1 << 20, reduction.ShapeDAry}, {16 << 20, reduction.ShapeSliced}} {
		name := fmt.Sprintf("min-slice-%d", c.size)
		var ids []string
		var data [][]byte
		for i := range nodes {
			id := fmt.Sprintf("%s-src%d", name, i)
			b := rdData(rng, messages.ReduceOp_SUM, messages.DType_INT64, c.size/8)
			rdPut(t, ctx, l, i, id, b)
			ids, data = append(ids, id), append(data, b)
		}
		if ch := plan.ChooseAllReduce(nodes, 0, 1e9, int64(c.size), 8, nodes, false); !ch.Sliced {
			t.Fatalf("%s: the cost model alone does not slice it (%+v): the test shows nothing", name, ch)
		}
		r, err := l.Client(0).AllReduce(ctx, name+"-all", ids, nodes, messages.ReduceOp_SUM, messages.DType_INT64)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := r.GetPlan().GetShape(); got != c.shape {
			t.Fatalf("%s: shape %q, want %q", name, got, c.shape)
		}
		want := slicedRef(messages.ReduceOp_SUM, messages.DType_INT64, data)
		for i := range nodes {
			got, err := l.Client(i).Get(ctx, name+"-all")
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: node %d's result: err %v, equal %v", name, i, err, bytes.Equal(got, want))
			}
		}
		for _, id := range append(ids, name+"-all") {
			if err := l.Client(0).Delete(ctx, id); err != nil {
				t.Fatalf("delete %s: %v", id, err)
			}
		}
	}
}
