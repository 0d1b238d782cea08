// Package storeactor holds the store node actor and the reduce workers
// beside it: the StoreNode that serves Put, Get and Delete for one member
// and runs every fetch of an object arriving from another member itself
// (fetchRun: one state machine from the Get to its end, inline or
// streamed, whose Locate goes through the node's Locator and whose answer
// comes back as that call's result), and a reduce worker per reduce tree
// position. Each is a shell around a pure step type of package
// github.com/hoplite-go/hoplite/storenode (FetchProtocol, PutRegistration,
// Deletion, PositionRuns): messages and timers become steps, and a step's
// outbox becomes sends; the bytes move on one goroutine per copy, which
// reports only its end.
package storeactor
