package bench

import (
	"testing"
	"time"
)

func TestSpanOfRunsFromFirstStartToLastEnd(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	got := spanOf(
		timing{start: at(5), done: at(9)},
		timing{}, // a call that failed: no timing
		timing{start: at(2), done: at(4)},
		timing{start: at(3), done: at(12)},
	)
	if want := 10 * time.Millisecond; got != want {
		t.Errorf("span %v, want %v (first start 2 ms, last end 12 ms)", got, want)
	}
	if got := spanOf(timing{}); got != 0 {
		t.Errorf("span of nothing timed %v, want 0", got)
	}
}

// TestOwnSpans: the peers' way of timing a collective, each participant
// from its own start, the slowest; and how far apart they started.
func TestOwnSpans(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	own, skew := ownSpans(
		timing{start: at(5), done: at(9)},  // 4 ms
		timing{},                           // failed: not timed
		timing{start: at(2), done: at(4)},  // 2 ms
		timing{start: at(3), done: at(12)}, // 9 ms, the slowest
	)
	if own != 9*time.Millisecond || skew != 3*time.Millisecond {
		t.Errorf("own %v, skew %v; want 9ms (3 to 12) and 3ms (starts 2 to 5)", own, skew)
	}
	if own, skew := ownSpans(timing{}); own != 0 || skew != 0 {
		t.Errorf("nothing timed: own %v, skew %v", own, skew)
	}
}
