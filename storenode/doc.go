// Package storenode is one Hoplite node's object store: the Store that
// holds the bytes, the store node actor that serves Put, Get and Delete,
// the fetch sessions that pull objects from other nodes (forming broadcast
// trees with the directory's help), and the Client applications call.
package storenode
