// Package bufalloc makes the buffers that object bytes are received
// into without zeroing them: every byte is written before it is read, so
// zeroing would be one more pass over every byte a member receives. On
// the testbed the Go heap zeroed a receiver's reused 32 MiB buffer before
// the data plane wrote all of it once more.
//
// Transparent huge pages (MADV_HUGEPAGE) were tried for large buffers and
// left out: on this VM a fresh process's huge pages cost about twice the
// CPU of 4 KiB ones in its first operations (the memory behind them is
// new to the host too), which is where a member is slowest already.
//
// The allocation without zeroing is the runtime's, reached by
// go:linkname. Should a Go release refuse that link, build with
// -tags hoplite_zeroed: buffers are then made (and zeroed) by make.
package bufalloc

// Make returns a slice of n bytes whose contents are unspecified: the
// caller writes every byte before anyone reads it. n must not be
// negative.
func Make(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	return makeNoZero(n)[:n:n]
}
