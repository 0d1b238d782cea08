// Package storenode is one Hoplite node's object store as a library: the
// Store that holds the bytes (shared, concurrently, with the data plane
// that serves them), the protocols a store node runs, the reduce kernel
// loop (Combine), and the Client applications call.
//
// The protocols with decisions in them are pure step types that read no
// clock and do no I/O: FetchProtocol (locate a sender, stream, fail over,
// resume, rewind), PutRegistration (a Put's or StoreReduced's registration
// with the directory), Deletion (a Delete and the drops it waits for) and
// PositionRuns (when a reduce tree position runs, stops and rewinds).
// FetchProtocol holds no object either: what it needs of the store comes
// out of a step as a StoreOp, and Fetch runs it against the Store. The
// store node and reduce worker actors that drive them live in
// actors/storenode.
package storenode
