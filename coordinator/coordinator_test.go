package coordinator_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/messages"
)

// The plan Choose returns is the one a real Reduce carries out: on an
// embedded cluster, a Reduce and an AllReduce report their plans, and
// Choose, given the estimates each rested on, answers the same shape,
// degree, tree and costs.
func TestChooseIsWhatAReduceChose(t *testing.T) {
	const n = 4
	l, err := cluster.StartLocal(cluster.Config{Nodes: n})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprintf("src%d", i))
		if err := l.Client(i).PutFloat32s(ctx, ids[i], make([]float32, 64<<10)); err != nil { // 256 KiB: a tree, not inline
			t.Fatal(err)
		}
	}
	for _, all := range []bool{false, true} {
		call := l.Client(0).Reduce
		if all {
			call = l.Client(0).AllReduce
		}
		rep, err := call(ctx, fmt.Sprintf("sum-%v", all), ids, n, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		if err != nil {
			t.Fatal(err)
		}
		got := coordinator.FromReply(rep.GetPlan())
		if got.Size != 256<<10 || got.Shape == "" {
			t.Fatalf("AllReduce %v: the reply's plan %+v has no size or shape", all, got)
		}
		want, err := coordinator.Choose(coordinator.Input{Sources: n, Size: got.Size, Latency: got.Latency,
			Bandwidth: got.Bandwidth, AllReduce: all, DType: messages.DType_FLOAT32})
		if err != nil {
			t.Fatal(err)
		}
		if got.Shape != want.Shape || got.Degree != want.Degree || got.Slices != want.Slices ||
			!slices.Equal(got.Parents, want.Parents) || !maps.Equal(got.Costs, want.Costs) || !maps.Equal(got.ShapeCosts, want.ShapeCosts) {
			t.Errorf("AllReduce %v: the Reduce chose %v %+v;\nChoose says %v %+v", all, got, got, want, want)
		}
	}
}

// Choose refuses what is no Reduce, with a typed error.
func TestChooseRefusesNoSources(t *testing.T) {
	for _, in := range []coordinator.Input{{Sources: 0, Size: 1}, {Sources: 2, Size: -1}} {
		if _, err := coordinator.Choose(in); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("Choose(%+v): %v, want INVALID_ARGUMENT", in, err)
		}
	}
}

// Without a measured bandwidth the model has nothing to price: a chain,
// and no costs reported.
func TestChooseUnmeasuredIsAChain(t *testing.T) {
	p, err := coordinator.Choose(coordinator.Input{Sources: 6, Size: 1 << 20, Latency: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if p.Shape != coordinator.DAry || p.Degree != 1 || len(p.Costs) != 0 || len(p.Parents) != 6 {
		t.Fatalf("plan %v %+v, want a d-ary chain of 6 positions without costs", p, p)
	}
	if c := coordinator.Cost(6, 1, time.Millisecond, 0, 1<<20); c != time.Duration(1<<63-1) {
		t.Fatalf("Cost with no bandwidth: %v, want the largest Duration", c)
	}
}
