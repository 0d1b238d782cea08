// Command quickstart runs an embedded cluster of 8 members: an object Put
// on one member is fetched on others, then a Reduce sums the first 6 of 8
// gradients to be ready.
package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

func main() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 8}) // logs warnings and errors on stderr
	check(err)
	defer l.Stop()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	check(l.Client(0).Put(ctx, "weights", []byte("hello, hoplite"))) // copy in; node 0 is the creator
	buf, err := l.Client(3).Get(ctx, "weights")                      // waits until it exists, then fetches
	check(err)
	ro, err := l.Client(4).GetReadOnly(ctx, "weights") // zero-copy: do not modify
	check(err)
	mine := make([]byte, 64)
	n, err := l.Client(6).GetInto(ctx, "weights", mine) // into your buffer (reusable); no copy kept
	check(err)
	fmt.Printf("%s, %s, %s\n", buf, ro, mine[:n])
	check(l.Client(5).Delete(ctx, "weights")) // frees every copy; the id is never reused

	var grads []string
	for i := range 8 {
		grads = append(grads, fmt.Sprintf("g%d", i))
		check(l.Client(i).PutFloat32s(ctx, grads[i], []float32{1, 2, 3}))
	}
	reply, err := l.Client(0).Reduce(ctx, "grad-sum", grads, 6, // the first 6 of 8 to be ready
		messages.ReduceOp_SUM, messages.DType_FLOAT32)
	check(err)
	// reply.ReducedIds: the 6 that were reduced; reply.UnreducedIds: the others.
	sum, err := l.Client(3).GetFloat32s(ctx, "grad-sum") // an ordinary object now
	check(err)
	fmt.Println(len(reply.GetReducedIds()), "of", len(grads), "reduced:", sum)
}

// check ends the program on an error (skipping the deferred Stop: the
// process is ending anyway).
func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
