// Package objstore is one node's local object store: the Store, which
// holds the objects' buffers under a capacity (pinning, LRU eviction),
// and each Object, filled front to back by one Writer and read while its
// bytes still arrive. It lives outside the store node actor so that its
// contents survive the actor's restarts, and the data plane serves from
// it concurrently.
//
// The store node (internal/actors/storeactor), the fetch runner
// (internal/fetchrun) and the reduce streams (internal/reduceio) read and
// write it; its protocols (internal/storeproto) only ask for store
// operations. An application that runs its own store node gets a Store
// from actors.NewStore.
package objstore
