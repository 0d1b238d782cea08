package coordinator_test

import (
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/coordinator"
)

// The plans of a Reduce of 8 sources of 64 MiB on a 10 Gbit/s link: a
// chain, which moves each byte across each link once, and for an
// AllReduce the cheaper of slicing and a reduce followed by a broadcast:
// the latter, unless the members pace their streams.
func ExampleChoose() {
	in := coordinator.Input{Sources: 8, Size: 64 << 20, Latency: 200 * time.Microsecond, Bandwidth: 1.25e9}
	p, err := coordinator.Choose(in)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Shape, p.Degree, p.Parents)
	fmt.Println("chain", p.Costs[1].Round(time.Millisecond), "binary", p.Costs[2].Round(time.Millisecond))

	in.AllReduce = true
	p, err = coordinator.Choose(in)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Shape, p.Degree, "sliced", p.ShapeCosts[coordinator.Sliced].Round(time.Millisecond),
		"reduce+broadcast", p.ShapeCosts[coordinator.DAry].Round(time.Millisecond))

	// Members that pace their streams at a stated link rate contend less.
	in.Paced = true
	p, err = coordinator.Choose(in)
	if err != nil {
		panic(err)
	}
	fmt.Println(p.Shape, p.Slices)

	// Output:
	// d-ary 1 [1 2 3 4 5 6 7 -1]
	// chain 58ms binary 111ms
	// d-ary 1 sliced 168ms reduce+broadcast 130ms
	// sliced 8
}

// Sources under the inline limit are reduced in the coordinator itself.
func ExampleChoose_inline() {
	p, err := coordinator.Choose(coordinator.Input{Sources: 4, Size: 1 << 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(p)
	// Output: inline
}
