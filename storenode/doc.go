// Package storenode is what an application uses of a Hoplite node: the
// Client (Put, Get, GetReadOnly, GetInto, Delete, Reduce, AllReduce) and
// its typed helpers (PutNumbers, GetNumbers, ReduceNumbers, Encode,
// Decode).
//
// The machinery behind them is internal: one node's Store, which holds
// the bytes (internal/objstore), the protocols a store node runs, pure
// step machines (internal/storeproto), internal/fetchrun, which runs the
// fetch protocol against the Store, and the store node and reduce worker
// actors that drive them (internal/actors/storeactor).
//
// Numbers in, a reduction out (c is any member's Client, e.g. an embedded
// cluster's l.Client(0)):
//
//	c := l.Client(0)
//	for i, g := range [][]float32{{1, 2}, {10, 20}, {100, 200}} {
//		if err := storenode.PutNumbers(ctx, c, fmt.Sprintf("g%d", i), g); err != nil {
//			log.Fatal(err)
//		}
//	}
//	// The first 2 of the 3 to be ready, summed into "sum".
//	rep, err := storenode.ReduceNumbers[float32](ctx, c, "sum", []string{"g0", "g1", "g2"}, 2, messages.ReduceOp_SUM)
//	if err != nil {
//		log.Fatal(err)
//	}
//	sum, err := storenode.GetNumbers[float32](ctx, c, "sum") // rep.ReducedIds says which 2
package storenode
