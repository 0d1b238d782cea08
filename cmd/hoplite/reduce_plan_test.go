package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The plan printout says which of L and B were measured, and on how many
// samples, instead of leaving the reader to guess from the values.
func TestPrintPlanNamesTheEstimatesOrigin(t *testing.T) {
	for _, c := range []struct {
		nl, nb int64
		want   string
	}{
		{0, 0, "L = 100µs default, B = 125 MB/s default"},
		{7, 0, "L = 100µs measured (7 samples), B = 125 MB/s default"},
		{12, 1, "L = 100µs measured (12 samples), B = 125 MB/s measured (1 sample)"},
		{-1, -1, "L = 100µs (measured or default), B = 125 MB/s (measured or default)"},
	} {
		var out bytes.Buffer
		printPlan(&out, &messages.ReducePlan{Shape: "d-ary", Degree: 1, ObjectSize: 16 << 20,
			LatencyNs: int64(100 * time.Microsecond), Bandwidth: 125e6, LatencySamples: c.nl, BandwidthSamples: c.nb})
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("samples %d, %d: got\n%s\nwant a line with %q", c.nl, c.nb, out.String(), c.want)
		}
	}
	// A member that has measured no transfer plans without a bandwidth.
	var out bytes.Buffer
	printPlan(&out, &messages.ReducePlan{Shape: "d-ary", Degree: 1, ObjectSize: 16 << 20,
		LatencyNs: int64(time.Millisecond), LatencySamples: 3})
	if want := "B = unknown (no transfer measured yet: a chain)"; !strings.Contains(out.String(), want) {
		t.Errorf("unknown B: got\n%s\nwant a line with %q", out.String(), want)
	}
}
