// Package storenode is what an application uses of a Hoplite node: the
// Client (Put, Get, GetReadOnly, GetInto, Delete, Reduce, AllReduce) and
// its typed helpers (PutNumbers, GetNumbers, ReduceNumbers, Encode,
// Decode), and one node's Store, which holds the bytes (shared,
// concurrently, with the data plane that serves them).
//
// The machinery behind them is internal: the protocols a store node runs
// are pure step machines (internal/storeproto), internal/fetchrun runs the
// fetch protocol against the Store, and the store node and reduce worker
// actors that drive them live in actors/storenode.
package storenode
