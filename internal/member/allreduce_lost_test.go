package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// TestAllReduceOfASourceLostBeforeItBegan: the only copy of one source
// died with its node before the AllReduce began, so its coordinator's
// subscription never gets a location of it. The directory knows it is
// lost (a Get fails with LOST) and tells the subscription so: the
// AllReduce lowers n as for a participant that failed, and every
// survivor gets the exact sum of the other sources long before the
// deadline. (It used to wait for the lost source until its deadline:
// nothing told the coordinator, whose watch of the dead node never
// concerned that source.) Sliced (which needs every source: it plans a
// tree for the lowered n) and d-ary.
func TestAllReduceOfASourceLostBeforeItBegan(t *testing.T) {
	for _, shape := range []string{reduction.ShapeDAry, reduction.ShapeSliced} {
		t.Run(shape, func(t *testing.T) {
			const nodes, victim = 4, 3
			l := start(t, Config{exp: experiments.Set{AllReduceShape: shape}, Nodes: nodes, ChunkSize: 16 << 10, Log: faultLog()})
			ctx := deadline(t, 60*time.Second)
			// The coordinator runs on node 0, the caller; the lost
			// source's shard on a survivor (a shard that moves forgets
			// what it knew was lost).
			owned := func(prefix string, on ...int) string {
				for k := 0; k < 10000; k++ {
					id := fmt.Sprintf("%s-%d", prefix, k)
					for _, i := range on {
						if l.Member(0).ShardOwner(id) == l.Member(i).ID() {
							return id
						}
					}
				}
				t.Fatalf("no id of %q has its shard on nodes %v", prefix, on)
				return ""
			}
			target := owned("lost-target-"+shape, 0)
			var ids []string
			byID := map[string][]byte{}
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("lost-%s-%d", shape, i)
				if i == victim {
					id = owned(id, 0, 1, 2)
				}
				b := int64s(uint64(i+1), 40000) // 320 KB: not inline
				rdPut(t, ctx, l, i, id, b)
				ids, byID[id] = append(ids, id), b
			}
			if err := l.Kill(victim); err != nil {
				t.Fatal(err)
			}
			// The directory knows.
			gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_, err := l.Client(1).Get(gctx, ids[victim])
			cancel()
			if !errors.Is(err, messages.ErrLost) {
				t.Fatalf("Get of the victim's source: %v, want LOST", err)
			}
			// Waiting for the lost source would end in TIMEOUT at this
			// deadline: the error check below is what catches it.
			const timeout = 20 * time.Second
			rctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			began := time.Now()
			r, err := l.Client(0).AllReduce(rctx, target, ids, nodes, messages.ReduceOp_SUM, messages.DType_INT64)
			if err != nil {
				t.Fatalf("AllReduce with %s lost, after %v: %v", ids[victim], time.Since(began).Round(time.Millisecond), err)
			}
			if r.GetPlan().GetShape() != reduction.ShapeDAry {
				t.Fatalf("plan shape %q, want the tree of the lowered n", r.GetPlan().GetShape())
			}
			inputs := rdCheckSets(t, r, ids, nodes-1, byID)
			if un := r.GetUnreducedIds(); !slices.Equal(un, []string{ids[victim]}) {
				t.Fatalf("unreduced %v, want the lost %s", un, ids[victim])
			}
			want := make([]byte, len(inputs[0]))
			for _, in := range inputs {
				for e := 0; e < len(want); e += 8 {
					binary.LittleEndian.PutUint64(want[e:], binary.LittleEndian.Uint64(want[e:])+binary.LittleEndian.Uint64(in[e:]))
				}
			}
			for i := 0; i < nodes; i++ {
				if i == victim {
					continue
				}
				if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Get on node %d: err %v, equal %v", i, err, bytes.Equal(got, want))
				}
			}
			rdNoIntermediates(t, l)
		})
	}
}
