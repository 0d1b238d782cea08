//go:build race

package member

// raceEnabled: the race detector multiplies each member's memory and CPU
// several times; the chaos suite runs fewer seeds at once under it.
const raceEnabled = true
