//go:build !race

package cluster

// raceEnabled is false: the test binary runs without the race detector.
const raceEnabled = false
