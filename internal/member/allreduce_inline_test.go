package member

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// TestInlineAllReducePushesTheResult: an AllReduce of inline sources
// sends its result with the participants' Gets, so no participant locates
// it at the target's shard (which all of them would ask at once), and
// still every participant's store holds the exact result, the directory
// lists each copy (a Get anywhere is served from the local copy, with no
// Locate), and a Delete after the reply removes every copy.
func TestInlineAllReducePushesTheResult(t *testing.T) {
	const nodes = 4
	var mu sync.Mutex
	locates := map[string]int{} // target -> Locates its shard received
	l := start(t, Config{Nodes: nodes, hooks: testhooks.Set{Shard: func(_ string, msg any) {
		if m, ok := msg.(*messages.Locate); ok {
			mu.Lock()
			locates[m.GetObjectId()]++
			mu.Unlock()
		}
	}}})
	ctx := deadline(t, time.Minute)
	rng := rand.New(rand.NewPCG(16, 1))
	// Exact in any order of arrival: integers wrap, MIN and MAX pick.
	cases := []struct {
		dt  messages.DType
		ops []messages.ReduceOp
	}{
		{messages.DType_INT32, allOps},
		{messages.DType_INT64, allOps},
		{messages.DType_FLOAT32, []messages.ReduceOp{messages.ReduceOp_MIN, messages.ReduceOp_MAX}},
		{messages.DType_FLOAT64, []messages.ReduceOp{messages.ReduceOp_MIN, messages.ReduceOp_MAX}},
	}
	for _, c := range cases {
		for _, op := range c.ops {
			name := fmt.Sprintf("inline-%v-%v", c.dt, op)
			var ids []string
			var data [][]byte
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("%s-src%d", name, i)
				b := rdData(rng, op, c.dt, 100)
				rdPut(t, ctx, l, i, id, b)
				ids, data = append(ids, id), append(data, b)
			}
			want := data[0]
			for _, b := range data[1:] {
				var next []byte
				for e := 0; e < len(want); e += rdWidth(c.dt) {
					next = append(next, slicedOp(op, c.dt, want[e:e+rdWidth(c.dt)], b[e:e+rdWidth(c.dt)])...)
				}
				want = next
			}
			target := name + "-all"
			r, err := l.Client(nodes-1).AllReduce(ctx, target, ids, nodes, op, c.dt)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s := r.GetPlan().GetShape(); s != reduction.ShapeInline {
				t.Fatalf("%s: shape %q, want %q", name, s, reduction.ShapeInline)
			}
			for i := 0; i < nodes; i++ {
				o := l.Store(i).Lookup(target)
				if o == nil {
					t.Fatalf("%s: participant node %d has no copy of the result when the AllReduce returned", name, i)
				}
				got, err := o.Bytes()
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: node %d's copy: err %v, equal %v", name, i, err, bytes.Equal(got, want))
				}
			}
			info, err := l.Client(0).Info(ctx, target, false)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < nodes; i++ {
				node := fmt.Sprintf("node-%d", i)
				if !slices.ContainsFunc(info.GetLocations(), func(l *messages.Location) bool {
					return l.GetNode().GetNodeId() == node && l.GetState() == messages.LocationState_COMPLETE
				}) {
					t.Fatalf("%s: the directory lists %v, not %s's copy", name, info.GetLocations(), node)
				}
			}
			for i := 0; i < nodes; i++ {
				got, err := l.Client(i).Get(ctx, target)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s: Get on node %d: err %v, equal %v", name, i, err, bytes.Equal(got, want))
				}
			}
			mu.Lock()
			n := locates[target]
			mu.Unlock()
			if n != 0 {
				t.Fatalf("%s: the target's shard received %d Locates of the result; want none (pushed to the participants, served locally)", name, n)
			}
			if err := l.Client(0).Delete(ctx, target); err != nil {
				t.Fatalf("%s: delete: %v", name, err)
			}
			eventually(t, 10*time.Second, name+": every copy of the deleted result leaves its store", func() bool {
				for i := 0; i < nodes; i++ {
					if l.Store(i).Lookup(target) != nil {
						return false
					}
				}
				return true
			})
		}
	}
}

// TestInlineAllReducePushFallsBackToActorMessages: a participant whose
// data plane cannot be reached still gets an inline AllReduce's result,
// pushed again as an actor message.
func TestInlineAllReducePushFallsBackToActorMessages(t *testing.T) {
	const nodes = 3
	l := start(t, Config{Nodes: nodes})
	ctx := deadline(t, 30*time.Second)
	// A target whose coordinator is not on node 2, so that node 2's push
	// crosses members.
	var target string
	for k := 0; target == ""; k++ {
		id := fmt.Sprintf("fallback-%d", k)
		if l.NodeOf(l.Member(0).shardFor(id).GetAddress()) != 2 {
			target = id
		}
	}
	var ids []string
	want := make([]byte, 64)
	for i := 0; i < nodes; i++ {
		id := fmt.Sprintf("fallback-src%d", i)
		b := make([]byte, 64)
		for k := range b {
			b[k] = byte(i + k)
			want[k] += b[k]
		}
		rdPut(t, ctx, l, i, id, b)
		ids = append(ids, id)
	}
	l.transport.Unserve(l.Node(2).GetDataAddress())
	if _, err := l.Client(0).AllReduce(ctx, target, ids, nodes, messages.ReduceOp_SUM, messages.DType_INT32); err != nil {
		t.Fatalf("AllReduce with node 2's data plane down: %v", err)
	}
	o := l.Store(2).Lookup(target)
	if o == nil {
		t.Fatal("node 2 has no copy of the result")
	}
	if got, err := o.Bytes(); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("node 2's copy: err %v, equal %v", err, bytes.Equal(got, want))
	}
}
