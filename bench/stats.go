package bench

import (
	"slices"
	"time"
)

// Stats summarises the repetitions of one measurement.
type Stats struct {
	Median, Min, Max time.Duration
	N                int
}

// Summarize returns the median (the mean of the two middle values for an
// even count), minimum and maximum of ds; the zero Stats for none.
func Summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return Stats{Median: med, Min: s[0], Max: s[n-1], N: n}
}

// medianOf is the median of xs (0 for none).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}
