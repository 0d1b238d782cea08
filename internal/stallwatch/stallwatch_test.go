package stallwatch

import (
	"testing"
	"time"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

// Within counts only the part of each gap inside the span asked about.
func TestWithinClipsGapsToTheSpan(t *testing.T) {
	w := &Watch{}
	w.Add(at(1), at(3))
	w.Add(at(5), at(6))
	for _, tc := range []struct {
		from, to float64
		want     time.Duration
	}{
		{0, 10, 3 * time.Second},
		{2, 5.5, 1500 * time.Millisecond},
		{3, 5, 0},
		{6, 7, 0},
	} {
		if got := w.Within(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("within %v..%v: %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	if s := w.Summary(); s.Gaps != 2 || s.Total != 3*time.Second || s.Longest != 2*time.Second {
		t.Errorf("summary %+v, want 2 gaps, 3s in all, the longest 2s", s)
	}
	var none *Watch
	if got := none.Within(at(0), at(10)); got != 0 {
		t.Errorf("a nil watch paused %v", got)
	}
}

// A watch keeps at most maxGaps, dropping the oldest; its summary still
// counts them all.
func TestWatchKeepsABoundedNumberOfGaps(t *testing.T) {
	w := &Watch{}
	for i := range maxGaps + 10 {
		w.Add(at(float64(i)), at(float64(i)+0.5))
	}
	if len(w.gaps) != maxGaps {
		t.Fatalf("%d gaps kept, want %d", len(w.gaps), maxGaps)
	}
	if got := w.Within(at(0), at(10)); got != 0 {
		t.Errorf("the oldest gaps still counted: %v", got)
	}
	if s := w.Summary(); s.Gaps != maxGaps+10 {
		t.Errorf("summary counts %d gaps, want %d", s.Gaps, maxGaps+10)
	}
}
