package revoke

import (
	"os"
	"runtime/debug"
	"testing"
)

// TestMain collects less often than the default: the simulations make a
// Broadcaster (and its window) for every member of every wave, millions
// of short-lived maps, and under -race each collection and each page the
// heap takes back costs the shadow memory too. At 400 the package took
// a fifth less CPU (about 43 s against 50 s under -race); a GOGC in the
// environment wins.
func TestMain(m *testing.M) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(m.Run())
}
