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
