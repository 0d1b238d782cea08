//go:build hoplite_zeroed

package bufalloc

// makeNoZero is make: this build does not link to the runtime's
// allocation without zeroing (see the package documentation).
func makeNoZero(n int) []byte { return make([]byte, n) }
