//go:build !race

package bufalloc

const raceEnabled = false
