//go:build race

package bufalloc

const raceEnabled = true
