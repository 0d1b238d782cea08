// Package storenode is what an application uses of a Hoplite node: the
// Client (Put, Get, GetReadOnly, GetInto, Delete, Reduce, AllReduce) and
// its typed helpers (PutNumbers, GetNumbers, ReduceNumbers, Encode,
// Decode), and one node's Store, which holds the bytes (shared,
// concurrently, with the data plane that serves them).
//
// The protocols a store node runs are pure step machines in
// internal/storeproto, no part of this API: Fetch runs the fetch protocol
// against the Store (what it needs of the store comes out of a step as a
// store operation), and the store node and reduce worker actors that
// drive them live in actors/storenode.
package storenode
