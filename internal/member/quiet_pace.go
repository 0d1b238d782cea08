package member

import (
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/memberwatch"
)

// quietFactor is how many base intervals a membership loop may wait
// between rounds once nothing changes (memberwatch.QuietFactor).
const quietFactor = memberwatch.QuietFactor

// quietPace is memberwatch.Pace shared by a membership loop's goroutines
// (the seeds' health checks, the seed exchange), with a Kick that also
// wakes the loop's Wait. The pace keeps an idle cluster's checks sparse
// while joins, leaves and failures still reach a member within base:
// each is a Kick or a change in the round that sees it.
type quietPace struct {
	mu   sync.Mutex
	pace memberwatch.Pace
	kick chan struct{}
}

func newQuietPace(base time.Duration) *quietPace {
	return &quietPace{pace: memberwatch.NewPace(base), kick: make(chan struct{}, 1)}
}

// Next is the wait before the round after one that changed (or not)
// something.
func (q *quietPace) Next(changed bool) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pace.Next(changed)
}

// current is the interval the last Next gave (or base after a Kick).
func (q *quietPace) current() time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pace.Current()
}

// Kick makes the next round start now, and the interval base again.
func (q *quietPace) Kick() {
	q.mu.Lock()
	q.pace.Kick()
	q.mu.Unlock()
	select {
	case q.kick <- struct{}{}:
	default: // a kick is pending already
	}
}

// Wait returns after d, or at once on a Kick; false if done closed
// first.
func (q *quietPace) Wait(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-q.kick:
		return true
	case <-t.C:
		return true
	}
}
