// Package localput is what a Client's Put and its store node in the same
// process hand each other: the Put and its data's fingerprint, computed
// on the caller's goroutine so that the node's mailbox does not wait for
// it. None of it crosses a process, and none of it is part of package
// storenode's API.
package localput

import "github.com/hoplite-go/hoplite/messages"

// MinSize is the size from which a Client in the store node's process
// sends a Request instead of the bare Put: the fingerprint reads every
// byte (two CRC-32s, about 0.15 ms per MiB on the testbed's VM, 4.8 ms
// for 32 MiB), and in the node's Receive it would hold every message
// behind the Put (a reduce task, a fetch's stream, a publication) that
// long. Below it the Put is sent as it is.
const MinSize = 1 << 20

// Request is a Put whose Fingerprint (fingerprint.Of of Put's data) its
// sender computed. The node trusts it: only a Client in its own process
// sends one.
type Request struct {
	Put         *messages.Put
	Fingerprint uint64
}
