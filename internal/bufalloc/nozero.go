//go:build !hoplite_zeroed

package bufalloc

import _ "unsafe" // for go:linkname

// makeNoZero is the runtime's allocation without zeroing that
// strings.Builder and bytes.Join use (internal/bytealg.MakeNoZero). A
// []byte holds no pointers, so the garbage collector never reads what
// the allocation left in it.
//
//go:linkname makeNoZero internal/bytealg.MakeNoZero
func makeNoZero(n int) []byte
