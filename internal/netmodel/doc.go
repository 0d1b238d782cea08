// Package netmodel keeps the running estimates of the network that the
// cost model and the transfers share: the control-message latency L and
// the link bandwidth B, from durations the callers measured. It reads no
// clock and takes no lock, so it is pure; the shells of a member share
// one set of estimates through internal/netmodel/estimator, which locks.
package netmodel

// MinMeasuredTransfer is the smallest transfer whose rate is taken as the
// link's bandwidth: a shorter one mostly measures its set-up. It does not
// follow the chunk size, so that a cluster of 1 MiB objects sent in 1 MiB
// chunks learns its bandwidth too.
const MinMeasuredTransfer = 256 << 10
