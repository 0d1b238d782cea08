package barrier_test

import (
	"context"
	"fmt"
	"log"
	"sort"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
)

// A partial barrier on an embedded cluster: it fires once 3 of at most 4
// tasks entered and 200 ms passed, without waiting for the straggler.
func ExampleNew() {
	l, err := cluster.StartLocal(cluster.Config{Nodes: 3})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	b, err := barrier.New(ctx, l, "map-phase", barrier.Max(4), barrier.MinPercent(75),
		barrier.MinWait(200*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	defer b.Stop()
	passes := make(chan *barrier.Pass, 3)
	for _, task := range []string{"map-0", "map-1", "map-2"} { // map-3 straggles
		go func() {
			p, err := b.Enter(ctx, task)
			if err != nil {
				log.Fatal(err)
			}
			passes <- p
		}()
	}
	var passed []string
	for range 3 {
		p := <-passes
		passed = append(passed, p.Label+" ("+p.Reason+")")
	}
	sort.Strings(passed)
	fmt.Println(passed)
	// Output: [map-0 (percent) map-1 (percent) map-2 (percent)]
}
