package storenode_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// Put, Get and Reduce of float32 slices: three members each Put their
// gradient, one Reduce sums them into a new object, and any member Gets
// the sum.
func ExampleClient_Reduce() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var grads []string
	for i := range 3 {
		id := fmt.Sprintf("grad-%d", i)
		g := []float32{float32(i), 1, 0.5}
		if err := l.Client(i).PutFloat32s(ctx, id, g); err != nil {
			log.Fatal(err)
		}
		grads = append(grads, id)
	}
	// All 3 sources, summed as float32 (storenode.ReduceNumbers[float32]
	// picks the element type from the slice type).
	r, err := storenode.ReduceNumbers[float32](ctx, l.Client(0), "grad-sum", grads, 3, messages.ReduceOp_SUM)
	if err != nil {
		log.Fatal(err)
	}
	sum, err := l.Client(2).GetFloat32s(ctx, "grad-sum")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(r.GetReducedIds()), "reduced:", sum)
	// Output: 3 reduced: [3 3 1.5]
}

// The first 2 of 3 objects to exist are reduced: the third is never Put.
func ExampleClient_Reduce_firstOfMany() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for i, v := range [][]int64{{1, 2}, {10, 20}} {
		if err := l.Client(i).PutInt64s(ctx, fmt.Sprintf("part-%d", i), v); err != nil {
			log.Fatal(err)
		}
	}
	_, err = l.Client(0).Reduce(ctx, "total", []string{"part-0", "part-1", "part-2"}, 2,
		messages.ReduceOp_SUM, messages.DType_INT64)
	if err != nil {
		log.Fatal(err)
	}
	total, err := l.Client(1).GetInt64s(ctx, "total")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(total)
	// Output: [11 22]
}
