// Package storenode is one Hoplite node's object store: the Store that
// holds the bytes, the store node actor that serves Put, Get and Delete,
// the fetch sessions that pull objects from other nodes (forming broadcast
// trees with the directory's help), and the Client applications call.
//
// The protocols with decisions in them are pure step types that read no
// clock and do no I/O, driven by thin actor shells: PutRegistration (a
// Put's or StoreReduced's registration with the directory), Deletion (a
// Delete and the drops it waits for) and PositionRuns (when a reduce tree
// position runs, stops and rewinds).
package storenode
