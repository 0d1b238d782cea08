package storenode

import "github.com/hoplite-go/hoplite/fingerprint"

// Fingerprint is fingerprint.Of: what Create and Allocate expect as an
// object's fingerprint.
func Fingerprint(data []byte) uint64 { return fingerprint.Of(data) }
