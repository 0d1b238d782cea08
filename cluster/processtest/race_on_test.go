//go:build race

package processtest

// raceEnabled: the race detector checks every word a copy moves, three
// quarters of a 300 MiB object's test; those sizes run without it.
const raceEnabled = true
