// Package storeproto holds a store node's protocols as pure step
// machines, which read no clock and do no I/O: FetchProtocol (locate a
// sender, stream, fail over, resume, rewind; what it needs of the store
// comes out of a step as a StoreOp, which fetchrun.Fetch runs against
// the Store), PutRegistration (a Put's or StoreReduced's registration
// with the directory), Deletion (a Delete and the drops it waits for) and
// PositionRuns (when a reduce tree position runs, stops and rewinds), and
// CheckTask. They are the machinery behind package storenode's Client,
// not part of it: the store node and reduce worker actors that drive them
// live in internal/actors/storeactor, and the simulator (sim) drives them too.
//
// The rules a Client and its store node share are here too: the segments
// of a Put of unknown length (SegmentName and their sizes) and a Wait's
// arguments (CheckWait).
package storeproto
