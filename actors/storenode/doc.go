// Package storenode holds the store node actor and its children: the
// StoreNode that serves Put, Get and Delete for one member, a fetch
// session per object arriving from another member, and a reduce worker
// per reduce tree position. (A fetch whose Locate goes on the data plane
// starts in the StoreNode itself, and gets a session only if it needs
// more than that Locate: an inline object needs none; see lightFetch.) Each is a shell around a pure step type of
// package github.com/hoplite-go/hoplite/storenode (FetchProtocol,
// PutRegistration, Deletion, PositionRuns): messages and timers become
// steps, and a step's outbox becomes sends; the bytes move on one
// goroutine per copy, which reports only its end.
package storenode
