//go:build !race

package processtest

// raceEnabled: see race_on_test.go.
const raceEnabled = false
