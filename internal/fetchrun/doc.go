// Package fetchrun runs a fetch protocol (internal/storeproto) against a
// node's Store: Fetch reads the object's state for each step, carries out
// the store operations the protocol asks for and holds the writer the
// streams write through. The store node's fetches (internal/actors/storeactor) and
// the simulator's run on it; it is no part of package storenode's API.
package fetchrun
