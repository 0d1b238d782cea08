package cluster

import (
	"sync"
	"time"
)

// quietFactor is how many base intervals a membership loop may wait
// between rounds once nothing changes.
const quietFactor = 10

// quietPace paces a periodic membership round (the seeds' health poll,
// the seed exchange): every base interval while something changes, and
// twice as long after each round that changed nothing, up to quietFactor
// times base. Kick brings it back to base at once and wakes a Wait.
//
// Why: every member polls every other member's /_health and asks a peer
// for seeds each interval, n² requests per interval for n members. An
// idle cluster of 16 members on a 2-vCPU machine spent half of a CPU on
// its own membership at a 200 ms interval. Joins, leaves and failures
// still reach a member within base: each is a Kick (a seed learned, a
// member's leave or failure announced) or shows as a change in the
// round that sees it.
type quietPace struct {
	base, max time.Duration

	mu   sync.Mutex
	cur  time.Duration
	kick chan struct{}
}

func newQuietPace(base time.Duration) *quietPace {
	return &quietPace{base: base, max: quietFactor * base, cur: base, kick: make(chan struct{}, 1)}
}

// Next is the wait before the round after one that changed (or not)
// something.
func (q *quietPace) Next(changed bool) time.Duration {
	q.mu.Lock()
	defer q.mu.Unlock()
	if changed {
		q.cur = q.base
	} else {
		q.cur = min(2*q.cur, q.max)
	}
	return q.cur
}

// Kick makes the next round start now, and the interval base again.
func (q *quietPace) Kick() {
	q.mu.Lock()
	q.cur = q.base
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
