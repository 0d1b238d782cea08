//go:build !race

package cluster

// raceEnabled: the test binary runs under the race detector.
const raceEnabled = false
