package plan_test

import (
	"fmt"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// The thesis' Figure 2.5a: six objects, binary tree; the k-th arrival
// takes position k.
func ExampleNewTree() {
	tree, err := plan.NewTree(6, 2)
	if err != nil {
		panic(err)
	}
	for pos := 0; pos < tree.N(); pos++ {
		fmt.Printf("position %d (R%d): parent %d\n", pos, pos+1, tree.Parent(pos))
	}
	fmt.Println("root", tree.Root(), "height", tree.Height())
	// Output:
	// position 0 (R1): parent 1
	// position 1 (R2): parent 3
	// position 2 (R3): parent 1
	// position 3 (R4): parent -1
	// position 4 (R5): parent 5
	// position 5 (R6): parent 3
	// root 3 height 2
}

// Figure 2.5b: R2 fails after R7 arrived as a backup.
func ExampleAssignment_Replace() {
	tree, _ := plan.NewTree(6, 2)
	a := plan.NewAssignment(tree)
	for _, id := range []string{"R1", "R2", "R3", "R4", "R5", "R6", "R7"} {
		a.Arrive(id)
	}
	r, _ := a.Replace("R2")
	fmt.Println("position", r.Pos, "now held by", r.NewID)
	for _, p := range r.Invalidate {
		fmt.Println("clear", a.Holder(p))
	}
	fmt.Println(a.Placed(), a.Complete())
	// Output:
	// position 1 now held by R7
	// clear R4
	// [R1 R7 R3 R4 R5 R6] true
}

func ExampleChooseDegree() {
	// L=1ms, S/B=1ms, 64 KiB chunks: eq. 2.1 plus the pipeline's fill.
	d, costs := plan.ChooseDegree(16, 1_000_000, 1e9, 1_000_000, 4)
	for k := 1; k <= 4; k++ {
		fmt.Printf("d=%d T=%v\n", k, costs[k])
	}
	fmt.Println("chosen", d)
	// Output:
	// d=1 T=17.917504ms
	// d=2 T=6.393216ms
	// d=3 T=5.916935ms
	// d=4 T=6.262144ms
	// chosen 3
}
